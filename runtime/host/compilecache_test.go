package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmccm/wasmccm/abi"
)

// TestCompilationCacheShared: the runtimes of a process that name one
// directory share one cache; those given the same bytes at once compile
// them in turn, waiting no longer than their compile context allows, and
// no turn outlives the compilations it ordered.
func TestCompilationCacheShared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cache, err := sharedCompilationCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := sharedCompilationCache(filepath.Join(dir, "sub", "..")); err != nil || again != cache {
		t.Fatalf("the same directory, named otherwise, gave another cache (%v)", err)
	}
	wasm := manyFunctions(2_000)
	runtime := func() wazero.Runtime {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache.cache))
		t.Cleanup(func() { rt.Close(ctx) })
		return rt
	}

	// Another runtime is compiling these bytes: a compile whose context
	// ends first gives up waiting, compiling nothing.
	held := &compileTurn{token: make(chan struct{}, 1), users: 1}
	held.token <- struct{}{}
	key := sha256.Sum256(wasm)
	cache.mu.Lock()
	cache.compiling[key] = held
	cache.mu.Unlock()
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cache.compile(expired, runtime(), wasm); !errors.Is(err, context.Canceled) {
		t.Fatalf("a compile waiting for its turn under an ended context: %v, want context.Canceled", err)
	}
	cache.mu.Lock()
	users := held.users
	cache.mu.Unlock()
	if users != 1 {
		t.Fatalf("the turn has %d users after the waiter gave up, want 1 (its holder)", users)
	}
	// Under a live context it waits, and compiles once the turn is free.
	rt := runtime()
	waited := make(chan error, 1)
	go func() {
		_, err := cache.compile(ctx, rt, wasm)
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("a compile ended (%v) while another runtime held the turn for the same bytes", err)
	case <-time.After(100 * time.Millisecond):
	}
	<-held.token
	if err := <-waited; err != nil {
		t.Fatalf("a compile after the turn was freed: %v", err)
	}
	cache.mu.Lock()
	delete(cache.compiling, key)
	cache.mu.Unlock()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range cap(errs) {
		rt := runtime()
		wg.Go(func() {
			_, err := cache.compile(ctx, rt, wasm)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(cache.compiling); n != 0 {
		t.Fatalf("%d turns left after every compilation ended", n)
	}
}

// TestValidateThenNewShareCompilation: a module validated and then started
// with one cache directory starts; so does one started while another of the
// same bytes runs, and it serves after that one closed: closing a module
// releases its share of the process's cache, not the cache.
func TestValidateThenNewShareCompilation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := abiModule(answerFalse, nil)
	if _, problems := Validate(ctx, wasm, dir); len(problems) > 0 {
		t.Fatal(problems)
	}
	first, err := New(ctx, wasm, Config{CompilationCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(ctx, wasm, Config{CompilationCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The code the first module compiled stays in use by the second.
	var exists abi.Bool
	if err := second.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "n"}, &exists); err != nil {
		t.Fatalf("a call after the other module of the same bytes closed: %v", err)
	}
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClosedModulesFreeSharedCode: the machine code of closed modules is
// freed though the process's compilation cache, which holds it in memory,
// lives on: a CCM that reloads new bytes for weeks keeps no version's code
// but those running.
func TestClosedModulesFreeSharedCode(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("measures executable mappings in /proc/self/maps")
	}
	ctx := context.Background()
	dir := t.TempDir()
	// A module of many functions, its code far larger than the shared
	// code wazero keeps per cache.
	wasm := func(i int) []byte { return manyFunctions(2_000 + i) }
	goruntime.GC()
	before := executableBytes(t)
	start, err := New(ctx, wasm(0), Config{CompilationCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	one := executableBytes(t) - before // a module's code, the cache's own included
	start.Close(ctx)
	for i := 1; i <= 10; i++ {
		mod, err := New(ctx, wasm(i), Config{CompilationCacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		mod.Close(ctx)
	}
	// The last module closed may still be reachable for a while (its
	// timers, a goroutine not yet scheduled): up to two modules' worth may
	// be left, not the eleven a leak leaves.
	var left int
	for range 50 {
		goruntime.GC()
		if left = executableBytes(t) - before; left <= 2*one {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d bytes of executable memory after 11 modules were closed, %d while one ran", left, one)
}

// executableBytes sums the anonymous executable mappings of the process:
// compiled guest code.
func executableBytes(t *testing.T) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for line := range strings.Lines(string(maps)) {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "r-xp" {
			continue // a file's mapping, or not executable
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		total += int(b - a)
	}
	return total
}
