package host

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

// Guests whose time goes into calls, recursion and bulk instructions
// rather than loops: each would run for hours (2^60 calls) or for good,
// and none of them turns a loop often enough for a check at loop headers
// alone to stop it. Their functions are appended to stallModule's, and
// take and return an i32.

var i32Func = [2][]byte{{wt.I32}, {wt.I32}}

// nMinus1 pushes n-1.
var nMinus1 = wt.Seq(wt.LocalGet(0), wt.I32Const(1), []byte{0x6b})

// unlessZero is the body of a function that returns 0 for n = 0 and
// otherwise what rest leaves.
func unlessZero(rest []byte) []byte {
	return wt.Seq(wt.LocalGet(0), []byte{0x45, 0x04, 0x7f}, wt.I32Const(0), []byte{0x05}, rest, []byte{0x0b})
}

// binaryRecursion is f(n) = f(n-1) + f(n-1), through call or, with
// indirect, through the table; before runs at every call.
func binaryRecursion(indirect bool, before []byte) func(first uint32) []wt.Func {
	return func(first uint32) []wt.Func {
		call := wt.Call(first)
		if indirect {
			call = wt.Seq(wt.I32Const(0), wt.CallIndirect(first))
		}
		return []wt.Func{{Params: i32Func[0], Results: i32Func[1], InTable: indirect,
			Body: wt.Seq(before, unlessZero(wt.Seq(nMinus1, call, nMinus1, call, []byte{0x6a})))}}
	}
}

// mutualRecursion is f(n) = g(n-1) + g(n-1), g(n) = f(n-1) + f(n-1).
func mutualRecursion(first uint32) []wt.Func {
	body := func(other uint32) []byte {
		return unlessZero(wt.Seq(nMinus1, wt.Call(other), nMinus1, wt.Call(other), []byte{0x6a}))
	}
	return []wt.Func{
		{Params: i32Func[0], Results: i32Func[1], Body: body(first + 1)},
		{Params: i32Func[0], Results: i32Func[1], Body: body(first)},
	}
}

// callTree is 60 functions, each calling the next twice, with no
// recursion and no loop: 2^60 calls of straight-line code.
func callTree(first uint32) []wt.Func {
	const depth = 60
	funcs := make([]wt.Func, depth)
	for i := range depth - 1 {
		next := wt.Call(first + uint32(i) + 1)
		funcs[i] = wt.Func{Params: i32Func[0], Results: i32Func[1], Body: wt.Seq(wt.LocalGet(0), next, wt.LocalGet(0), next, []byte{0x6a})}
	}
	funcs[depth-1] = wt.Func{Params: i32Func[0], Results: i32Func[1], Body: wt.LocalGet(0)}
	return funcs
}

// inALoop turns, for good, a loop around the function inner makes
// (called with 16: 131,071 calls a turn, no loop in them).
func inALoop(inner func(first uint32) []wt.Func) func(first uint32) []wt.Func {
	return func(first uint32) []wt.Func {
		funcs := inner(first + 1)
		loop := wt.Seq([]byte{0x03, 0x40}, wt.I32Const(16), wt.Call(first+1), wt.Drop, []byte{0x0c, 0x00, 0x0b}, wt.I32Const(0))
		return append([]wt.Func{{Params: i32Func[0], Results: i32Func[1], Body: loop}}, funcs...)
	}
}

// bulkLoop grows memory to 64 MiB and turns, for good, a loop around one
// bulk instruction over most of it.
func bulkLoop(instr []byte) func(first uint32) []wt.Func {
	return func(uint32) []wt.Func {
		grow := wt.Seq(wt.I32Const(1023), []byte{0x40, 0x00}, wt.Drop)
		return []wt.Func{{Params: i32Func[0], Results: i32Func[1],
			Body: wt.Seq(grow, []byte{0x03, 0x40}, instr, []byte{0x0c, 0x00, 0x0b}, wt.I32Const(0))}}
	}
}

// stateGetMiss asks the shared state for a key it does not have: a host
// function at every call of the recursion.
var stateGetMiss = wt.Seq(wt.I32Const(messageAt), wt.I32Const(1), wt.I64Const(-1), wt.I32Const(0), wt.Call(stallStateGet), wt.Drop)

var guestShapes = []struct {
	name  string
	funcs func(first uint32) []wt.Func
	n     int32
}{
	{"binary recursion", binaryRecursion(false, nil), 60},
	{"indirect recursion", binaryRecursion(true, nil), 60},
	{"mutual recursion", mutualRecursion, 60},
	{"a call tree without recursion", callTree, 1},
	{"recursion calling the host", binaryRecursion(false, stateGetMiss), 60},
	{"a loop around recursion", inALoop(binaryRecursion(false, nil)), 0},
	{"a loop of memory.fill", bulkLoop(wt.Seq(wt.I32Const(0), wt.I32Const(1), wt.I32Const(64<<20), []byte{0xfc, 0x0b, 0x00})), 0},
	{"a loop of memory.copy", bulkLoop(wt.Seq(wt.I32Const(32<<20), wt.I32Const(0), wt.I32Const(32<<20), []byte{0xfc, 0x0a, 0x00, 0x00})), 0},
}

// withShape appends a shape's functions and makes export run its first
// one with n, after before, and then answer as it did.
func withShape(export string, funcs func(first uint32) []wt.Func, n int32, before []byte) func(*wt.Module) {
	return func(m *wt.Module) {
		first := uint32(len(m.Imports) + len(m.Funcs))
		m.Funcs = append(m.Funcs, funcs(first)...)
		f := &m.Funcs[funcIndex(m, export)]
		f.Body = wt.Seq(before, wt.I32Const(n), wt.Call(first), wt.Drop, f.Body)
	}
}

// TestEveryShapeStopsAtDeadline: whatever shape the guest's code has, the
// call ends within abortMargin of its deadline as a timeout, a collection
// forced while it runs finishes within a second, the module answers the
// next call, and Close returns.
func TestEveryShapeStopsAtDeadline(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, shape := range guestShapes {
		t.Run(shape.name, func(t *testing.T) {
			log, running := signalOn("running")
			mod, err := New(context.Background(), stallModule(withShape(abi.ExportInstanceExists, shape.funcs, shape.n, logLine("running"))),
				Config{Name: "shape", PoolSize: 1, CallTimeout: timeout, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			heapBefore := heapInUse()
			start := time.Now()
			callErr := make(chan error, 1)
			go func() { callErr <- mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil) }()
			awaitSignal(t, running, "the guest")
			gcStart := time.Now()
			runtime.GC()
			if took := time.Since(gcStart); took > time.Second {
				t.Errorf("a collection took %s while the guest ran", took)
			}
			var failure *FailureError
			select {
			case err := <-callErr:
				if !errors.As(err, &failure) || failure.Reason != ReasonTimeout {
					t.Errorf("the call: %v, want a timeout", err)
				}
			case <-time.After(timeout + 10*time.Second):
				t.Fatal("the call never returned")
			}
			if took := time.Since(start); took > timeout+abortMargin {
				t.Errorf("the call returned after %s, want at most %s", took, timeout+abortMargin)
			}
			if err := mod.Call(context.Background(), abi.ExportInstanceShutdown, &abi.Node{Name: "n"}, nil); err != nil {
				t.Errorf("the next call: %v", err)
			}
			if grew := heapInUse() - heapBefore; grew > int64(Defaults().StackLimitBytes) {
				t.Errorf("the heap grew by %d MiB, more than an instance's stack limit", grew>>20)
			}
			closed := make(chan error, 1)
			go func() { closed <- mod.Close(context.Background()) }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close never returned")
			}
		})
	}
}

// heapInUse is the Go heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return int64(s.HeapInuse)
}

// TestRecursingStartUpFailsNew: every part of start-up recursing without a
// loop ends at the call timeout, and New fails with that reason.
func TestRecursingStartUpFailsNew(t *testing.T) {
	const timeout = 300 * time.Millisecond
	appendRecursion := func(m *wt.Module) uint32 {
		first := uint32(len(m.Imports) + len(m.Funcs))
		m.Funcs = append(m.Funcs, binaryRecursion(false, nil)(first)...)
		return first
	}
	inFunc := func(pick func(m *wt.Module) *wt.Func) func(*wt.Module) {
		return func(m *wt.Module) {
			first := appendRecursion(m)
			f := pick(m)
			f.Body = wt.Seq(wt.I32Const(60), wt.Call(first), wt.Drop, f.Body)
		}
	}
	export := func(name string) func(m *wt.Module) *wt.Func {
		return func(m *wt.Module) *wt.Func { return &m.Funcs[funcIndex(m, name)] }
	}
	added := func(f wt.Func) func(m *wt.Module) *wt.Func {
		return func(m *wt.Module) *wt.Func {
			m.Funcs = append(m.Funcs, f)
			return &m.Funcs[len(m.Funcs)-1]
		}
	}
	for _, tc := range []struct {
		name    string
		edit    func(*wt.Module)
		wantErr string
	}{
		{"the start section", inFunc(added(wt.Func{Start: true})), "start functions stopped: ran past the 300ms call timeout"},
		{"_initialize", inFunc(added(wt.Func{Export: "_initialize"})), "start functions stopped: ran past the 300ms call timeout"},
		{"the ABI version", inFunc(export(abi.ExportABIVersion)), "wasmccm_abi_version: module call failed (timeout)"},
		{"init", inFunc(export(abi.ExportInit)), "wasmccm_init: module call failed (timeout)"},
		// init, like every export, is entered through alloc and set_deadline.
		{"alloc", inFunc(export(abi.ExportAlloc)), "wasmccm_init: module call failed (timeout)"},
		{"set_deadline", inFunc(added(wt.Func{Export: abi.ExportSetDeadline, Params: []byte{wt.I64}})), "wasmccm_init: module call failed (timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			mod, err := New(context.Background(), stallModule(tc.edit), Config{Name: "recursing-start", PoolSize: 1, CallTimeout: timeout})
			if err == nil {
				mod.Close(context.Background())
				t.Fatal("New accepted a module whose start-up recurses for hours")
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if took := time.Since(start); took > timeout+abortMargin {
				t.Fatalf("it failed after %s, want at most %s", took, timeout+abortMargin)
			}
		})
	}
}

// TestStackWithinLimit: a recursion that fits the stack returns; one that
// does not traps, in every export, with the reason said, long before
// wazero's own stack ceiling; and however deep the exports went, the
// instance's stack stays within its limit in the Go heap.
func TestStackWithinLimit(t *testing.T) {
	// f(n) = n == 0 ? 0 : f(n-1): n frames.
	linear := func(first uint32) []wt.Func {
		return []wt.Func{{Params: i32Func[0], Results: i32Func[1], Body: unlessZero(wt.Seq(nMinus1, wt.Call(first)))}}
	}
	cfg := Config{Name: "deep", PoolSize: 1, MemoryLimitPages: 16, CallTimeout: 5 * time.Second}.withDefaults()
	exports := []string{abi.ExportInstanceExists, abi.ExportInstanceShutdown, abi.ExportInstanceMetadata}
	mod, err := New(context.Background(), stallModule(func(m *wt.Module) {
		first := uint32(len(m.Imports) + len(m.Funcs))
		m.Funcs = append(m.Funcs, linear(first)...)
		withLoadBalancer(m)
		for _, c := range abi.Capabilities {
			if c.Capability == abi.CapabilityLoadBalancer {
				exports = append(exports, c.Exports...)
			}
		}
		// Each export recurses 100 frames deep per byte of its input.
		for _, name := range exports {
			f := &m.Funcs[funcIndex(m, name)]
			f.Body = wt.Seq(wt.LocalGet(1), wt.I32Const(100), []byte{0x6c}, wt.Call(first), wt.Drop, okEmpty)
		}
	}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	heapBefore := heapInUse()
	for _, export := range exports {
		in := abi.Message(&abi.Node{Name: strings.Repeat("n", 10_000)}) // a million frames
		if strings.Contains(export, "load_balancer") {
			in = &abi.LoadBalancerRequest{ClusterName: strings.Repeat("c", 10_000)}
		}
		err := mod.Call(context.Background(), export, in, nil)
		var failure *FailureError
		if !errors.As(err, &failure) || failure.Reason != ReasonTrap || !errors.Is(err, errStackExhausted) {
			t.Errorf("%s a million frames deep: %v, want a trap for the stack", export, err)
		}
	}
	if grew := heapInUse() - heapBefore; grew > int64(cfg.StackLimitBytes) {
		t.Errorf("after %d exports recursed, the heap grew by %d KiB, more than the %d KiB of one instance's stack limit",
			len(exports), grew>>10, cfg.StackLimitBytes>>10)
	}
	if err := mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil); err != nil {
		t.Errorf("a recursion a thousand frames deep: %v", err)
	}
}

// blockingTransport answers no request until release is closed, whatever
// the request's context says: a host function that never returns, which
// leaves the guest code that called it running past its deadline.
type blockingTransport struct {
	entered chan struct{}
	release chan struct{}
}

func (b blockingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	b.entered <- struct{}{}
	<-b.release
	return nil, errors.New("released")
}

// TestStuckGuestGivesSlotBack: guest code that runs on past its deadline
// and the abort margin, here in a host function that does not return, has
// its pool slot given back after stuckAfter, so that the module's next
// call gets an instance; the stuck one is counted and reported; Close
// returns without waiting for it; and when it returns at last, its
// instance and the module's code are released.
func TestStuckGuestGivesSlotBack(t *testing.T) {
	const timeout = 200 * time.Millisecond
	request := abi.Marshal(nil, &abi.HTTPRequest{Method: "GET", URL: "http://cloud.example/stuck"})
	httpDo := uint32(len(stallImports))
	wasm := stallModule(func(m *wt.Module) {
		m.Imports = append(m.Imports, wt.Import{Module: abi.ImportModule, Name: abi.ImportHTTPDo, Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}})
		setBody(abi.ExportInstanceExists, wt.Seq(wt.StoreBytes(messageAt, request),
			wt.I32Const(messageAt), wt.I32Const(int32(len(request))), wt.Call(httpDo), wt.Drop, okEmpty))(m)
	})
	transport := blockingTransport{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var reported []string
	cfg := Config{Name: "stuck", PoolSize: 1, CallTimeout: timeout, OnStuck: func(what string) { reported = append(reported, what) }}
	cfg.HTTP.AllowedOrigins = []string{"http://cloud.example"}
	cfg.HTTP.Wrap = func(http.RoundTripper) http.RoundTripper { return transport }
	mod, err := New(context.Background(), wasm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stuckCall := make(chan error, 1)
	go func() {
		stuckCall <- mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil)
	}()
	<-transport.entered
	start := time.Now()
	for bound := timeout + stuckAfter + abortMargin; ; {
		err := mod.Call(context.Background(), abi.ExportInstanceShutdown, &abi.Node{Name: "n"}, nil)
		if err == nil {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("no call got an instance within %s of the guest getting stuck: %v", bound, err)
		}
	}
	if got, _ := testutil.GetGaugeMetricValue(instancesStuck.WithLabelValues("stuck")); got != 1 {
		t.Errorf("instances_stuck = %v, want 1", got)
	}
	if len(reported) != 1 || reported[0] != abi.ExportInstanceExists {
		t.Errorf("OnStuck was told %q, want [%s]", reported, abi.ExportInstanceExists)
	}
	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	mod.Close(ctx)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close returned after %s", took)
	}
	close(transport.release)
	if err := <-stuckCall; err == nil {
		t.Error("the stuck call answered")
	}
	if got, _ := testutil.GetGaugeMetricValue(instancesStuck.WithLabelValues("stuck")); got != 0 {
		t.Errorf("instances_stuck = %v once the code returned, want 0", got)
	}
	if live := liveInstancesOf(mod); live != 0 {
		t.Errorf("%d instances of the closed module live once the stuck code returned", live)
	}
}
