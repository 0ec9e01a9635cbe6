package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/bench/testdata/guestwork/work"
)

const guestworkModule = "testdata/guestwork"

// BenchmarkGuest times the parts of a provider call one by one, inside a
// module (called through wazero directly, one unit of work per export
// call) and natively: decoding the cloud's JSON answer with encoding/json,
// and decoding the ABI messages. It explains where BenchmarkCall's time
// goes; see testdata/guestwork/work. The -unchecked variants are compiled
// without wazero's deadline check (see benchGuestWork).
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
// checked compiles it with WithCloseOnContextDone (an exit to Go at every
// loop header of the guest's code, which is what lets wazero stop a guest
// that loops forever) and a context with a deadline on every call;
// unchecked leaves both out, to show their cost. runtime/host runs a
// module under wazero's check only when it cannot instrument it with its
// own, which checks in once per loop budget
// (runtime/host/internal/loopcheck): unchecked is what that comes close to.
func benchGuestWork(b *testing.B, tc wasmbuild.Toolchain, kind int, checked bool) {
	ctx := context.Background()
	wasm := moduleWasm(b, guestworkModule, tc)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(checked).
		WithCompilationCache(benchCompilationCache(b)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
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
