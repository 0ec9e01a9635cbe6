package wasmbuild

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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

// TestLockFileExcludes: a second holder of the build lock waits until the
// first lets go, as a test process building the same module would.
func TestLockFileExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.wasm.lock")
	unlock, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan func())
	go func() {
		second, err := lockFile(path)
		if err != nil {
			t.Error(err)
			second = func() {}
		}
		acquired <- second
	}()
	select {
	case second := <-acquired:
		second()
		t.Fatal("the second lock was granted while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case second := <-acquired:
		second()
	case <-time.After(10 * time.Second):
		t.Fatal("the second lock was not granted after the first was released")
	}
}
