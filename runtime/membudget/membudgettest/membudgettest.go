// Package membudgettest lays out fake cgroup trees for tests of code that
// applies a memory budget (runtime/membudget).
package membudgettest

import (
	"os"
	"path/filepath"
	"testing"
)

// Cgroups writes files under a temporary root as /proc and /sys show them
// and returns the root, to be passed as membudget.Apply's cgroupRoot.
func Cgroups(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
