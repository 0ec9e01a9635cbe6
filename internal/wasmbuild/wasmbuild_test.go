package wasmbuild

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCacheKeyIgnoresCheckoutPath: two checkouts of the same source share
// their cached modules, and a changed source file is a new key.
func TestCacheKeyIgnoresCheckoutPath(t *testing.T) {
	checkout := func(main string) (root, pkg string) {
		root = t.TempDir()
		for name, content := range map[string]string{
			"go.mod":                       "module github.com/wasmccm/wasmccm\n",
			"abi/abi.go":                   "package abi\n",
			"modules/guest/module/main.go": main,
		} {
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root, filepath.Join(root, "modules", "guest", "module")
	}
	key := func(root, pkg string) string {
		k, err := cacheKey(root, pkg, Go, "go", []string{"build"})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	first, second := key(checkout("package main\n")), key(checkout("package main\n"))
	if first != second {
		t.Errorf("the same source in two checkouts: keys %s and %s", first, second)
	}
	if changed := key(checkout("package main\n\nfunc main() {}\n")); changed == first {
		t.Error("a changed source file kept the key")
	}
}
