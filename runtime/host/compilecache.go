package host

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"
)

// compilationCache is the one wazero.CompilationCache of this process for
// a directory. Runtimes that share it share the machine code in memory as
// well as on disk (wazero counts the runtimes using a compiled module and
// frees it with the last), so a module started with the same bytes while
// another runs them is neither compiled nor read back from disk: a reload
// that changed only the config, the conformance suite's instances for a
// second cluster and for limited credentials. One started after the last
// closed, as after validation, reads the code back from the directory.
type compilationCache struct {
	cache wazero.CompilationCache

	// wazero checks its cache before compiling and holds no lock while it
	// compiles, so runtimes given the same bytes at once would each
	// compile them. compiling holds, for each module being compiled, a
	// turn that the later runtimes wait for; they then find the code in
	// memory.
	mu        sync.Mutex
	compiling map[[sha256.Size]byte]*compileTurn
}

// compileTurn is held by the runtime compiling a module; users counts the
// runtimes holding or waiting for it, so that the last one removes it.
type compileTurn struct {
	token chan struct{}
	users int
}

var compilationCaches = struct {
	sync.Mutex
	byDir map[string]*compilationCache
}{byDir: map[string]*compilationCache{}}

// sharedCompilationCache returns the process's cache for dir, made on
// first use.
func sharedCompilationCache(dir string) (*compilationCache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	compilationCaches.Lock()
	defer compilationCaches.Unlock()
	if c, ok := compilationCaches.byDir[abs]; ok {
		return c, nil
	}
	cache, err := wazero.NewCompilationCacheWithDir(abs)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	c := &compilationCache{cache: cache, compiling: map[[sha256.Size]byte]*compileTurn{}}
	compilationCaches.byDir[abs] = c
	return c, nil
}

// compile compiles wasm in rt, a runtime configured with this cache, once
// no other runtime is compiling the same bytes through it. ctx bounds the
// wait as well as the compilation: waiting for a module's compilation
// takes no longer than compiling it. Without a cache (nil), rt compiles
// at once.
func (c *compilationCache) compile(ctx context.Context, rt wazero.Runtime, wasm []byte) (wazero.CompiledModule, error) {
	if c == nil {
		return rt.CompileModule(ctx, wasm)
	}
	key := sha256.Sum256(wasm)
	c.mu.Lock()
	turn := c.compiling[key]
	if turn == nil {
		turn = &compileTurn{token: make(chan struct{}, 1)}
		c.compiling[key] = turn
	}
	turn.users++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if turn.users--; turn.users == 0 {
			delete(c.compiling, key)
		}
		c.mu.Unlock()
	}()

	select {
	case turn.token <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-turn.token }()
	return rt.CompileModule(ctx, wasm)
}
