// Package wasmbuild compiles guest modules from Go source for tests,
// benchmarks and tools, with standard Go or TinyGo, and caches the result
// by the content of everything that goes into it, so a test run rebuilds a
// module only when its source, the SDK or the toolchain changed.
package wasmbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Toolchain selects the compiler.
type Toolchain string

const (
	Go     Toolchain = "go"
	TinyGo Toolchain = "tinygo"
)

// ErrNoTinyGo is returned when TinyGo is not installed.
var ErrNoTinyGo = errors.New("tinygo not found: run hack/install-tinygo.sh or set WASMCCM_TINYGO")

// CacheDir is where built modules and the install scripts' toolchains live.
func CacheDir() string {
	if dir := os.Getenv("WASMCCM_CACHE"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "wasmccm-cache")
	}
	return filepath.Join(home, ".cache", "wasmccm")
}

// TinyGoPath returns the TinyGo wrapper that hack/install-tinygo.sh
// installs, or the one named by WASMCCM_TINYGO.
func TinyGoPath() (string, error) {
	path := os.Getenv("WASMCCM_TINYGO")
	if path == "" {
		path = filepath.Join(CacheDir(), "tinygo", "v0.42.0", "bin", "tinygo-wasip1")
	}
	if _, err := os.Stat(path); err != nil {
		return "", ErrNoTinyGo
	}
	return path, nil
}

// Toolchains returns the toolchains guests are built with: Go, and TinyGo
// when it is installed. Without TinyGo it is an error only when
// WASMCCM_REQUIRE_TINYGO is set, as it is in CI.
func Toolchains() ([]Toolchain, error) {
	if _, err := TinyGoPath(); err != nil {
		if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
			return nil, err
		}
		return []Toolchain{Go}, nil
	}
	return []Toolchain{Go, TinyGo}, nil
}

// built memoizes Build per toolchain and package in this process. Each
// entry is built under a lock of its own, so that one process builds
// different modules side by side (the conformance suite wants eight at
// once) while two callers of the same module wait for one build.
var (
	mu    sync.Mutex
	built = map[string]*buildEntry{}
)

type buildEntry struct {
	sync.Mutex
	path string
}

// Build compiles the main package at pkgDir (a directory of this Go module)
// into a reactor module and returns the path of the .wasm file.
func Build(pkgDir string, tc Toolchain) (string, error) {
	pkgDir, err := filepath.Abs(pkgDir)
	if err != nil {
		return "", err
	}
	memo := string(tc) + ":" + pkgDir
	mu.Lock()
	entry, ok := built[memo]
	if !ok {
		entry = &buildEntry{}
		built[memo] = entry
	}
	mu.Unlock()
	entry.Lock()
	defer entry.Unlock()
	if entry.path != "" {
		return entry.path, nil
	}
	root, err := moduleRoot(pkgDir)
	if err != nil {
		return "", err
	}
	cmdName, args, env, err := command(tc)
	if err != nil {
		return "", err
	}
	key, err := cacheKey(root, pkgDir, tc, cmdName, args)
	if err != nil {
		return "", err
	}
	out := filepath.Join(CacheDir(), "modules", fmt.Sprintf("%s-%s-%s.wasm", filepath.Base(pkgDir), tc, key[:16]))
	if _, err := os.Stat(out); err != nil {
		if err := buildOnce(out, pkgDir, tc, cmdName, args, env); err != nil {
			return "", err
		}
	}
	entry.path = out
	return out, nil
}

// buildOnce builds the module into out unless another process does first.
// Tests in other processes, or other checkouts, may want the same module
// at once (the packages of `go test ./...` run side by side): one builds
// it while the others wait for the result, rather than each compiling it,
// which on a cold cache costs tens of seconds of CPU apiece.
func buildOnce(out, pkgDir string, tc Toolchain, cmdName string, args, env []string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(out + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	// A file of its own to build into, renamed when complete: a reader
	// that does not lock sees the whole module or none.
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	cmd := exec.Command(cmdName, append(args, "-o", tmp, ".")...)
	cmd.Dir, cmd.Env = pkgDir, append(os.Environ(), env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s with %s: %v\n%s", pkgDir, tc, err, output)
	}
	return os.Rename(tmp, out)
}

func command(tc Toolchain) (name string, args, env []string, err error) {
	switch tc {
	case Go:
		return "go", []string{"build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w"},
			[]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}, nil
	case TinyGo:
		path, err := TinyGoPath()
		if err != nil {
			return "", nil, nil, err
		}
		// -gc=leaking: no collector; the host's recycling reclaims the
		// memory (modules/README.md explains the trade).
		return path, []string{"build", "-buildmode=c-shared", "-scheduler=none", "-gc=leaking", "-no-debug", "-opt=2"}, nil, nil
	}
	return "", nil, nil, fmt.Errorf("unknown toolchain %q", tc)
}

// cacheKey hashes the toolchain's identity, the flags it is given and every
// Go source file of the tree that the package can depend on: abi/, modules/
// (the SDK module included) and the package itself. Hashing a little too
// much is cheap; a stale module is not. Paths are hashed relative to the
// repository's root, so that another clone or worktree of the same source
// finds the modules this one built.
func cacheKey(root, pkgDir string, tc Toolchain, cmdName string, args []string) (string, error) {
	h := sha256.New()
	version, err := exec.Command(cmdName, "version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %v: %s", cmdName, err, version)
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n%q\n", tc, version, relative(root, pkgDir), args)
	var files []string
	for _, dir := range []string{filepath.Join(root, "abi"), filepath.Join(root, "modules"), pkgDir, filepath.Join(root, "go.mod")} {
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !info.IsDir() && (strings.HasSuffix(path, ".go") || filepath.Base(path) == "go.mod") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", relative(root, f))
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// relative is path relative to root, which holds it.
func relative(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// RepoRoot is the root of the wasmccm repository holding dir, found by
// its go.mod: where a test finds the repository's files from its working
// directory, which works with -trimpath too (runtime.Caller's file names
// are then module paths).
func RepoRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return moduleRoot(abs)
}

func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/wasmccm/wasmccm\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside the wasmccm module", dir)
		}
	}
}
