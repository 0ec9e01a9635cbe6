package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/host/hosttest"
	"github.com/wasmccm/wasmccm/test/bench/testdata/guestwork/work"
)

const guestworkModule = "testdata/guestwork"

// BenchmarkGuest times the parts of a provider call one by one, inside a
// module (called through wazero directly, one unit of work per export
// call) and natively: decoding the cloud's JSON answer with encoding/json,
// and decoding the ABI messages. It explains where BenchmarkCall's time
// goes; see testdata/guestwork/work. The wasm variants run the module as
// the host rewrites it, with its deadline and stack checks; the
// -unchecked ones as it was built, with no check, to show their cost.
func BenchmarkGuest(b *testing.B) {
	for kind := range work.Kinds {
		b.Run(work.Names[kind], func(b *testing.B) {
			b.Run("native", func(b *testing.B) {
				fn := func() error { return checkWork(work.Run(kind, 1)) }
				measure(b, fn)
			})
			for _, tc := range toolchains {
				for _, checked := range []bool{true, false} {
					name := "wasm-" + string(tc)
					if !checked {
						name += "-unchecked"
					}
					b.Run(name, func(b *testing.B) { benchGuestWork(b, tc, kind, checked) })
				}
			}
		})
	}
}

// benchGuestWork calls the guestwork module's export once per iteration.
// checked runs it rewritten as the host runs a module
// (runtime/host/internal/loopcheck), with a context with a deadline on
// every call; unchecked leaves both out, to show their cost.
func benchGuestWork(b *testing.B, tc wasmbuild.Toolchain, kind int, checked bool) {
	ctx := context.Background()
	wasm := moduleWasm(b, guestworkModule, tc)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(benchCompilationCache(b)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	if checked {
		var err error
		if wasm, err = hosttest.Instrument(wasm); err != nil {
			b.Fatal(err)
		}
		if err := hosttest.InstantiateCheck(ctx, rt); err != nil {
			b.Fatal(err)
		}
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().
		WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime())
	if err != nil {
		b.Fatal(err)
	}
	export := mod.ExportedFunction("work")
	var stack [2]uint64
	fn := func() error {
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if checked {
			callCtx, cancel = context.WithTimeout(ctx, 10*time.Second)
		}
		defer cancel()
		stack[0], stack[1] = uint64(kind), 1
		if err := export.CallWithStack(callCtx, stack[:]); err != nil {
			return err
		}
		return checkWork(int(int32(stack[0])))
	}
	measure(b, fn)
}

func checkWork(n int) error {
	if n <= 0 {
		return errWork
	}
	return nil
}

type workError struct{}

func (workError) Error() string { return "guest work failed" }

var errWork = workError{}

func benchCompilationCache(b *testing.B) wazero.CompilationCache {
	cache, err := wazero.NewCompilationCacheWithDir(sharedCache)
	if err != nil {
		b.Fatal(err)
	}
	return cache
}
