package host

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmccm/wasmccm/abi"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/host/internal/loopcheck"
)

// checksIn reports whether compiled imports loopcheck's check: whether the
// host runs it instrumented rather than under wazero's check.
func checksIn(compiled wazero.CompiledModule) bool {
	return slices.ContainsFunc(compiled.ImportedFunctions(), func(def api.FunctionDefinition) bool {
		module, _, _ := def.Import()
		return module == loopcheck.ImportModule
	})
}

// TestGuestsAreInstrumented: what Go and TinyGo build is rewritten and
// compiled with the check, not refused.
func TestGuestsAreInstrumented(t *testing.T) {
	for _, tc := range toolchains(t) {
		rt, compiled, err := compile(context.Background(), guestWasm(t, "testprovider", tc), Config{Name: "instrumented"}.withDefaults())
		if err != nil {
			t.Fatal(err)
		}
		if !checksIn(compiled) {
			t.Errorf("the %s guest compiled without the check", tc)
		}
		closeRuntime(context.Background(), rt, compiled)
	}
}

// TestSpinningGuestLetsCollectionRun: a guest spinning in a loop gives the
// goroutine back often enough that a collection, which stops every
// goroutine, finishes long before the call's deadline.
func TestSpinningGuestLetsCollectionRun(t *testing.T) {
	log, running := signalOn("running")
	mod, err := New(context.Background(), stallModule(setBody(abi.ExportInstanceExists, wt.Seq(logLine("running"), wt.LoopForever, okEmpty))),
		Config{Name: "spin-gc", PoolSize: 1, CallTimeout: 3 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	callErr := make(chan error, 1)
	go func() { callErr <- mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil) }()
	awaitSignal(t, running, "the guest")
	start := time.Now()
	runtime.GC()
	if took := time.Since(start); took > time.Second {
		t.Errorf("a collection took %s while the guest spun", took)
	}
	var failure *FailureError
	if err := <-callErr; !errors.As(err, &failure) || failure.Reason != ReasonTimeout {
		t.Fatalf("the spinning call: %v, want a timeout", err)
	}
}

// TestModuleCannotReachTheCounter: a module that sets, in a loop, the
// global the rewrite adds (an index invalid as the module is written)
// would keep its budget from ever running out, so that neither its
// deadline nor a collection could stop it. It is refused at load.
func TestModuleCannotReachTheCounter(t *testing.T) {
	resetCounter := wt.Seq([]byte{0x03, 0x40}, wt.I32Const(1<<30), []byte{0x24, 0x00, 0x0c, 0x00, 0x0b}) // loop: global.set 0; br 0
	mod, err := New(context.Background(), stallModule(setBody(abi.ExportInstanceExists, wt.Seq(resetCounter, okEmpty))),
		Config{Name: "counter-reset", PoolSize: 1, CallTimeout: 300 * time.Millisecond})
	if err == nil {
		mod.Close(context.Background())
		t.Fatal("New accepted a module that sets a global it does not define")
	}
	if !strings.Contains(err.Error(), "invalid wasm module") {
		t.Fatalf("New: %v, want the module refused as invalid", err)
	}
}

// BenchmarkInstrument is the rewrite's cost, paid each time a module is
// compiled, cache hits included, for the Go and TinyGo test providers.
func BenchmarkInstrument(b *testing.B) {
	for _, tc := range toolchains(b) {
		wasm := guestWasm(b, "testprovider", tc)
		b.Run(string(tc), func(b *testing.B) {
			b.SetBytes(int64(len(wasm)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := loopcheck.Instrument(wasm, loopcheck.Options{StackBytes: Defaults().FrameBound(), Entries: entries}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
