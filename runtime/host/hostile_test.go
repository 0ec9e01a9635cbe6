package host

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

var (
	method  = [2][]byte{{wt.I32, wt.I32}, {wt.I64}}
	okEmpty = wt.I64Const(int64(abi.PackResult(2048, 1))) // a zero byte: StatusOK, no payload
)

// abiModule assembles a module that conforms to the ABI with an
// InstancesV2 capability whose exists body is given; edit lets a case break
// one part of it.
func abiModule(existsBody []byte, edit func(*wt.Module)) []byte {
	m := wt.Module{
		MemoryPages: 1,
		Funcs: []wt.Func{
			{Export: abi.ExportABIVersion, Results: []byte{wt.I32}, Body: wt.I32Const(abi.Version)},
			{Export: abi.ExportAlloc, Params: []byte{wt.I32}, Results: []byte{wt.I32}, Body: wt.I32Const(1024)},
			{Export: abi.ExportInit, Params: method[0], Results: method[1], Body: okEmpty},
			{Export: abi.ExportInstanceExists, Params: method[0], Results: method[1], Body: existsBody},
			{Export: abi.ExportInstanceShutdown, Params: method[0], Results: method[1], Body: okEmpty},
			{Export: abi.ExportInstanceMetadata, Params: method[0], Results: method[1], Body: okEmpty},
		},
	}
	if edit != nil {
		edit(&m)
	}
	return m.Bytes()
}

// withLoadBalancer adds the LoadBalancer capability's exports, each
// answering OK with nothing.
func withLoadBalancer(m *wt.Module) {
	for _, c := range abi.Capabilities {
		if c.Capability != abi.CapabilityLoadBalancer {
			continue
		}
		for _, name := range c.Exports {
			m.Funcs = append(m.Funcs, wt.Func{Export: name, Params: method[0], Results: method[1], Body: okEmpty})
		}
	}
}

func funcIndex(m *wt.Module, export string) int {
	for i, f := range m.Funcs {
		if f.Export == export {
			return i
		}
	}
	panic(export)
}

func withImport(im wt.Import) func(*wt.Module) {
	return func(m *wt.Module) { m.Imports = append(m.Imports, im) }
}

// TestRejectedModules: modules that break the ABI are refused at load
// with an error naming the problem.
func TestRejectedModules(t *testing.T) {
	cases := []struct {
		name    string
		wasm    []byte
		wantErr string
	}{
		{"not wasm", []byte("\x00asm garbage"), "invalid wasm module"},
		{"wrong ABI version", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs[funcIndex(m, abi.ExportABIVersion)].Body = wt.I32Const(2)
		}), "module implements ABI version 2; this host implements version 1"},
		{"missing allocator", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs[funcIndex(m, abi.ExportAlloc)].Export = ""
		}), "missing export wasmccm_alloc"},
		{"no memory", abiModule(okEmpty, func(m *wt.Module) { m.MemoryPages = 0 }), `missing exported memory "memory"`},
		{"wrong export signature", abiModule(okEmpty, func(m *wt.Module) {
			f := &m.Funcs[funcIndex(m, abi.ExportInstanceExists)]
			f.Params, f.Results, f.Body = []byte{wt.I32}, []byte{wt.I32}, wt.I32Const(1)
		}), "export wasmccm_instance_exists has signature (i32) -> (i32), want (i32, i32) -> (i64)"},
		{"incomplete capability", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs[funcIndex(m, abi.ExportInstanceMetadata)].Export = ""
		}), "capability InstancesV2 is incomplete"},
		{"unknown host function", abiModule(okEmpty, withImport(wt.Import{Module: "wasmccm", Name: "exec", Params: []byte{wt.I32}})),
			"imports unknown host function wasmccm.exec"},
		{"host function with wrong signature", abiModule(okEmpty, withImport(wt.Import{Module: "wasmccm", Name: "http_do", Params: []byte{wt.I32}})),
			"imports wasmccm.http_do as (i32) -> (), the host provides (i32, i32) -> (i32)"},
		{"foreign import module", abiModule(okEmpty, withImport(wt.Import{Module: "env", Name: "socket", Results: []byte{wt.I32}})),
			`imports env.socket from module "env"`},
		{"init traps", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs[funcIndex(m, abi.ExportInit)].Body = wt.Seq(wt.Unreachable, okEmpty)
		}), "unreachable"},
		{"init rejects config", abiModule(okEmpty, func(m *wt.Module) {
			result := abi.EncodeResult(nil, abi.Outcome{Status: abi.StatusError, Message: "bad endpoint"}, nil)
			m.Funcs[funcIndex(m, abi.ExportInit)].Body = wt.Seq(wt.StoreBytes(3000, result),
				wt.I64Const(int64(abi.PackResult(3000, uint32(len(result))))))
		}), "module rejected its configuration: bad endpoint"},
		{"optional export without its capability", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportListLoadBalancers, Params: method[0], Results: method[1], Body: okEmpty})
		}), "export wasmccm_list_load_balancers needs capability LoadBalancer"},
		{"start function never returns", abiModule(okEmpty, func(m *wt.Module) {
			m.Funcs = append(m.Funcs, wt.Func{Export: "_initialize", Body: wt.LoopForever})
		}), "start functions stopped: ran past the 500ms call timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			mod, err := New(context.Background(), tc.wasm, Config{Name: "hostile", CallTimeout: 500 * time.Millisecond})
			if err == nil {
				mod.Close(context.Background())
				t.Fatalf("module accepted, want error %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("refusal took %s", time.Since(start))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			// Validate does not run init, so it cannot see init's failures.
			if _, problems := Validate(ctx, tc.wasm, ""); len(problems) == 0 && !strings.HasPrefix(tc.name, "init") {
				t.Fatalf("Validate found no problem in a module New refuses")
			}
		})
	}
}

// TestHostileCalls: a module that misbehaves inside a call fails that call
// with an ABI violation, and the host keeps serving with new instances and
// without leaking slots or goroutines.
func TestHostileCalls(t *testing.T) {
	httpImport := withImport(wt.Import{Module: "wasmccm", Name: "http_do", Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}})
	cases := []struct {
		name    string
		body    []byte
		edit    func(*wt.Module)
		wantErr string
	}{
		{"result outside memory", wt.I64Const(int64(abi.PackResult(0xffff0000, 16))), nil, "outside guest memory"},
		{"oversized result", wt.I64Const(int64(abi.PackResult(0, 0xffffff00))), nil, "exceeds the 8388608-byte limit"},
		{"truncated result", okEmpty, nil, "decoding result"},
		{"host call with pointer outside memory", wt.Seq(wt.I32Const(-16), wt.I32Const(100), wt.Call(0), wt.Drop, okEmpty), httpImport,
			"http_do: 100 bytes at 0xfffffff0 are outside guest memory"},
		{"host call with malformed request", wt.Seq(wt.I32Const(0), wt.I32Const(100), wt.Call(0), wt.Drop, okEmpty), httpImport,
			"http_do: abi: malformed message"},
	}
	baseline := runtime.NumGoroutine()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mod, err := New(context.Background(), abiModule(tc.body, tc.edit), Config{Name: "hostile", PoolSize: 1, CallTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			// With one slot, a call that leaked its slot would block the next.
			for i := 0; i < 5; i++ {
				err := mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, new(abi.Bool))
				var failure *FailureError
				if !errors.As(err, &failure) || failure.Reason != ReasonABIViolation || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("call %d: err = %v, want an ABI violation containing %q", i, err, tc.wantErr)
				}
			}
			// The rest of the module still answers.
			if err := mod.Call(context.Background(), abi.ExportInstanceShutdown, &abi.Node{}, nil); err != nil {
				t.Fatalf("healthy export after violations: %v", err)
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline+2 {
		t.Fatalf("goroutines: %d before, %d after", baseline, n)
	}
}

// TestOptionalExport: a module without an optional export loads and is
// never called for it; one with it (and the capability it needs) has it
// listed in its Info.
func TestOptionalExport(t *testing.T) {
	lb := withLoadBalancer
	without, err := New(context.Background(), abiModule(okEmpty, lb), Config{Name: "no-list", PoolSize: 1, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close(context.Background())
	if without.Info().Exports(abi.ExportListLoadBalancers) || !without.Info().Supports(abi.CapabilityLoadBalancer) {
		t.Fatalf("info %+v", without.Info())
	}
	in := abi.String("c")
	if err := without.Call(context.Background(), abi.ExportListLoadBalancers, &in, &abi.OwnedLoadBalancers{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("calling an absent optional export: %v, want ErrUnsupported", err)
	}
	with, err := New(context.Background(), abiModule(okEmpty, func(m *wt.Module) {
		lb(m)
		// An empty list: status OK, count 0.
		m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportListLoadBalancers, Params: method[0], Results: method[1],
			Body: wt.Seq(wt.StoreBytes(3000, []byte{0, 0}), wt.I64Const(int64(abi.PackResult(3000, 2))))})
	}), Config{Name: "list", PoolSize: 1, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close(context.Background())
	if !with.Info().Exports(abi.ExportListLoadBalancers) {
		t.Fatalf("info %+v lacks the optional export", with.Info())
	}
	var out abi.OwnedLoadBalancers
	if err := with.Call(context.Background(), abi.ExportListLoadBalancers, &in, &out); err != nil || len(out) != 0 {
		t.Fatalf("ListLoadBalancers = %v, %v", out, err)
	}
}

// TestNodeListExportMisbehaves: a module whose
// abi.ExportSetLoadBalancerNodes traps, spins or refuses fails the load
// balancer call that needed the list, with that export named, within the
// call's deadline; its EnsureLoadBalancer never runs without the list, and
// the next call sends the list again.
func TestNodeListExportMisbehaves(t *testing.T) {
	refused := abi.EncodeResult(nil, abi.Outcome{Status: abi.StatusError, Message: "refused"}, nil)
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		setBody []byte
		check   func(error) bool
	}{
		{"traps", wt.Seq(wt.Unreachable, okEmpty), func(err error) bool {
			var failure *FailureError
			return errors.As(err, &failure) && failure.Reason == ReasonTrap && failure.Export == abi.ExportSetLoadBalancerNodes
		}},
		{"spins", wt.Seq(wt.LoopForever, okEmpty), func(err error) bool {
			var failure *FailureError
			return errors.As(err, &failure) && failure.Reason == ReasonTimeout && failure.Export == abi.ExportSetLoadBalancerNodes
		}},
		{"refuses", wt.Seq(wt.StoreBytes(3000, refused), wt.I64Const(int64(abi.PackResult(3000, uint32(len(refused)))))), func(err error) bool {
			var status *StatusError
			return errors.As(err, &status) && status.Export == abi.ExportSetLoadBalancerNodes && status.Outcome.Message == "refused"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "set-nodes-" + tc.name
			wasm := abiModule(okEmpty, func(m *wt.Module) {
				// EnsureLoadBalancer traps: reached only if the host sent
				// a request after a list the module did not take.
				withLoadBalancer(m)
				setBody(abi.ExportEnsureLoadBalancer, wt.Seq(wt.Unreachable, okEmpty))(m)
				m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportSetLoadBalancerNodes, Params: method[0], Results: method[1], Body: tc.setBody})
			})
			mod, err := New(context.Background(), wasm, Config{Name: name, PoolSize: 1, CallTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			sets := func() float64 {
				var n float64
				for _, outcome := range []string{"ok", abi.StatusError.String(), ReasonTrap, ReasonTimeout} {
					v, _ := testutil.GetCounterMetricValue(callsTotal.WithLabelValues(name, abi.ExportSetLoadBalancerNodes, outcome))
					n += v
				}
				return n
			}
			req := &abi.LoadBalancerRequest{Service: abi.Service{Name: "web"}, Nodes: []abi.Node{{Name: "a"}}}
			for call := range 2 {
				start := time.Now()
				err := mod.Call(context.Background(), abi.ExportEnsureLoadBalancer, req, nil)
				if !tc.check(err) {
					t.Fatalf("call %d: err = %v, want the failure of %s", call, err, abi.ExportSetLoadBalancerNodes)
				}
				if took := time.Since(start); took > 4*timeout {
					t.Fatalf("call %d took %v with a %v call timeout", call, took, timeout)
				}
				if got := sets(); got != float64(call+1) {
					t.Fatalf("after %d calls the list was sent %v times, want once a call", call+1, got)
				}
			}
		})
	}
}

// TestNodeListCannotRaiseMarkPastCap: a module whose
// abi.ExportSetLoadBalancerNodes grows its memory, as if the list took it
// all, raises its recycling mark no higher than a quarter of its memory
// cap: the instance is replaced after each load balancer call that sent
// it a list, so it cannot keep more memory between calls than any other
// (SECURITY.md, guest memory).
func TestNodeListCannotRaiseMarkPastCap(t *testing.T) {
	const name = "set-nodes-grows"
	const capPages, growPages = 64, 40 // a 4 MiB cap; a quarter is 16 pages
	wasm := abiModule(okEmpty, func(m *wt.Module) {
		withLoadBalancer(m)
		grow := wt.Seq(wt.I32Const(growPages), []byte{0x40, 0x00}, wt.Drop, okEmpty) // memory.grow
		m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportSetLoadBalancerNodes, Params: method[0], Results: method[1], Body: grow})
	})
	mod, err := New(context.Background(), wasm, Config{Name: name, PoolSize: 1, CallTimeout: time.Second, MemoryLimitPages: capPages})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	recycled := func() float64 {
		n, _ := testutil.GetCounterMetricValue(instancesRecycled.WithLabelValues(name))
		return n
	}
	for call := range 2 {
		before := recycled()
		req := &abi.LoadBalancerRequest{Service: abi.Service{Name: "web"}, Nodes: []abi.Node{{Name: "a"}}} // a new list each call
		if err := mod.Call(context.Background(), abi.ExportEnsureLoadBalancer, req, nil); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); recycled() == before; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("call %d: an instance grown to %d of %d pages by its Node list was not replaced", call, growPages+1, capPages)
			}
		}
	}
}

// TestTrapInEveryMethod: a module whose every method traps fails each call
// as a trap, counts it, and is re-instantiated for the next call.
func TestTrapInEveryMethod(t *testing.T) {
	m := wt.Module{MemoryPages: 1, Funcs: []wt.Func{
		{Export: abi.ExportABIVersion, Results: []byte{wt.I32}, Body: wt.I32Const(abi.Version)},
		{Export: abi.ExportAlloc, Params: []byte{wt.I32}, Results: []byte{wt.I32}, Body: wt.I32Const(1024)},
		{Export: abi.ExportInit, Params: method[0], Results: method[1], Body: okEmpty},
	}}
	for _, c := range abi.Capabilities {
		for _, name := range c.Exports {
			m.Funcs = append(m.Funcs, wt.Func{Export: name, Params: method[0], Results: method[1], Body: wt.Seq(wt.Unreachable, okEmpty)})
		}
	}
	for _, o := range abi.OptionalExports {
		m.Funcs = append(m.Funcs, wt.Func{Export: o.Export, Params: method[0], Results: method[1], Body: wt.Seq(wt.Unreachable, okEmpty)})
	}
	mod, err := New(context.Background(), m.Bytes(), Config{Name: "traps-everywhere", PoolSize: 1, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	before, _ := testutil.GetCounterMetricValue(instancesReplaced.WithLabelValues("traps-everywhere", ReasonTrap))
	calls := 0
	for _, meth := range abi.Methods {
		if meth.Export == abi.ExportInit {
			continue
		}
		calls++
		err := mod.Call(context.Background(), meth.Export, meth.Input(), nil)
		var failure *FailureError
		if !errors.As(err, &failure) || failure.Reason != ReasonTrap {
			t.Fatalf("%s: err = %v, want a trap", meth.Name, err)
		}
	}
	after, _ := testutil.GetCounterMetricValue(instancesReplaced.WithLabelValues("traps-everywhere", ReasonTrap))
	if int(after-before) != calls {
		t.Fatalf("instances_replaced_total{reason=trap} rose by %v for %d traps", after-before, calls)
	}
}

// TestReplacementDoesNotLeakMemory: instances closed after traps give their
// memory back. A Go guest's instance holds several MiB, so keeping them
// would show within a few dozen replacements.
func TestReplacementDoesNotLeakMemory(t *testing.T) {
	f := newFixture(t, wasmbuild.Go, func(c *Config) { c.PoolSize = 1 })
	trap := func() {
		if err := f.mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "trap"}, new(abi.Bool)); err == nil {
			t.Fatal("trap call succeeded")
		}
	}
	for i := 0; i < 5; i++ { // warm up: code, pools, metrics
		trap()
	}
	start := heapAlloc()
	const rounds = 40
	for i := 0; i < rounds; i++ {
		trap()
	}
	if grown := int64(heapAlloc()) - int64(start); grown > 32<<20 {
		t.Fatalf("heap grew by %d MiB over %d instance replacements", grown>>20, rounds)
	}
}
