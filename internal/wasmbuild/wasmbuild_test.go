package wasmbuild

import (
	"os"
	"path/filepath"
	"strings"
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

// TestBuildSideBySide: one process builds two modules at once, and two
// callers of one module get one build. The go on PATH is a stand-in whose
// build of each module waits until the other module's build has started.
func TestBuildSideBySide(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":            "module github.com/wasmccm/wasmccm\n",
		"abi/abi.go":        "package abi\n",
		"modules/a/main.go": "package main\n",
		"modules/b/main.go": "package main\n",
	} {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin, marks := t.TempDir(), t.TempDir()
	// build: mark this module started, wait (at most 10 s) for the other
	// one's mark, then write the output named by -o.
	fake := `#!/bin/sh
[ "$1" = version ] && { echo "go version stand-in"; exit 0; }
me=$(basename "$PWD"); other=a; [ "$me" = a ] && other=b
echo "$me" >>"` + marks + `/log"
touch "` + marks + `/$me"
i=0
while [ ! -e "` + marks + `/$other" ]; do
  i=$((i+1)); [ $i -gt 200 ] && { echo "$other never started" >&2; exit 1; }
  sleep 0.05
done
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo built >"$out"
`
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("WASMCCM_CACHE", t.TempDir())

	errs := make(chan error, 3)
	for _, pkg := range []string{"a", "b", "a"} {
		go func() {
			_, err := Build(filepath.Join(root, "modules", pkg), Go)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	log, err := os.ReadFile(filepath.Join(marks, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(log)); len(got) != 2 {
		t.Errorf("builds run: %q, want a and b once each", got)
	}
}
