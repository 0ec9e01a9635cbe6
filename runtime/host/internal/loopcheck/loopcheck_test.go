package loopcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// testOptions are the options of tests that do not reach the stack bound.
var testOptions = Options{StackBytes: 1 << 30}

// The test module, assembled by hand so that it has what the rewrite must
// renumber: a function import before the defined functions, an imported
// global before the defined one, a start function, a table filled by an
// element segment and called through, exports and function names.
//
//	count(n):    n turns of a loop, each adding one to turns; returns turns + base
//	indirect(n): count(n) through the table
//	start:       calls env.note
const (
	fnNote = iota // imported
	fnCount
	fnIndirect
	fnStart
)

// countLoop is count's loop; the rewrite's cost per turn is its length.
var countLoop = cat(
	[]byte{0x03, 0x40},                               // loop
	[]byte{0x20, 0x00, 0x45, 0x0d, 0x01},             // local.get 0, i32.eqz, br_if 1
	[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00}, // n--
	[]byte{0x23, 0x01, 0x41, 0x01, 0x6a, 0x24, 0x01}, // turns++
	[]byte{0x0c, 0x00, 0x0b},                         // br 0, end
)

var (
	countBody = cat([]byte{0x02, 0x40}, countLoop, []byte{0x0b}, // block ... end
		[]byte{0x23, 0x01, 0x23, 0x00, 0x6a}) // turns + base
	indirectBody = []byte{0x20, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00} // call_indirect type 0, table 0
	startBody    = []byte{0x10, fnNote}
)

func testModule() []byte {
	return module(
		sec(1, vec([]byte{0x60, 1, 0x7f, 1, 0x7f}, []byte{0x60, 0, 0})),
		sec(2, vec(
			cat(str("env"), str("note"), []byte{0x00, 0x01}),
			cat(str("genv"), str("base"), []byte{0x03, 0x7f, 0x00}),
		)),
		sec(3, vec([]byte{0}, []byte{0}, []byte{1})),
		sec(4, vec([]byte{0x70, 0x00, 0x01})),
		sec(6, vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		sec(7, vec(
			cat(str("count"), []byte{0x00, fnCount}),
			cat(str("indirect"), []byte{0x00, fnIndirect}),
			cat(str("turns"), []byte{0x03, 0x01}),
		)),
		sec(8, []byte{fnStart}),
		sec(9, vec([]byte{0x00, 0x41, 0x00, 0x0b, 0x01, fnCount})),
		sec(10, vec(body(countBody), body(indirectBody), body(startBody))),
		sec(0, cat(str("name"), []byte{1}, sized(vec(
			cat([]byte{fnCount}, str("count_fn")),
			cat([]byte{fnIndirect}, str("indirect_fn")),
			cat([]byte{fnStart}, str("start_fn")),
		)))),
		sec(0, cat(str(".debug_info"), []byte{1, 2, 3})),
	)
}

// instance runs wasm with env.note counting its calls, genv.base = 1000
// and check as the loop check; the runtime has no check of its own.
func instance(t *testing.T, wasm []byte, check api.GoModuleFunc) (api.Module, *atomic.Int32) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { rt.Close(ctx) })
	var notes atomic.Int32
	if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func() { notes.Add(1) }).Export("note").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	genv := module(sec(6, vec([]byte{0x7f, 0x00, 0x41, 0xe8, 0x07, 0x0b})), sec(7, vec(cat(str("base"), []byte{0x03, 0x00}))))
	if _, err := rt.InstantiateWithConfig(ctx, genv, wazero.NewModuleConfig().WithName("genv")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(check, []api.ValueType{api.ValueTypeI32}, nil).Export(ImportName).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return mod, &notes
}

// budgetSim replays the countdown: charges taken from the budget, a check
// each time it goes below zero, which refills it.
type budgetSim struct{ left, checks int }

func newBudgetSim() *budgetSim { return &budgetSim{left: Budget} }

func (s *budgetSim) charge(cost, times int) {
	for range times {
		if s.left -= min(cost, Budget); s.left < 0 {
			s.left = Budget
			s.checks++
		}
	}
}

// bodySize is the size of body(code): a locals count, the code, its end.
func bodySize(code []byte) int { return len(code) + 2 }

func TestInstrumentedModuleRunsAsBefore(t *testing.T) {
	original := testModule()
	instrumented, _, err := Instrument(original, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int32
	counting := func(_ context.Context, _ api.Module, stack []uint64) {
		if int32(stack[0]) < 0 {
			t.Errorf("the check was called with %d of stack left", int32(stack[0]))
		}
		checks.Add(1)
	}
	const n = 3_000_000
	var results [2][2]uint64
	for i, wasm := range [][]byte{original, instrumented} {
		mod, notes := instance(t, wasm, counting)
		if notes.Load() != 1 {
			t.Fatalf("module %d: the start function called env.note %d times, want once", i, notes.Load())
		}
		for j, export := range []string{"count", "indirect"} {
			res, err := mod.ExportedFunction(export).Call(context.Background(), n)
			if err != nil {
				t.Fatalf("module %d: %s: %v", i, export, err)
			}
			results[i][j] = res[0]
		}
	}
	if results[0] != results[1] || results[1] != [2]uint64{n + 1000, 2*n + 1000} {
		t.Fatalf("count and indirect return %v as written and %v instrumented, want [%d %d]", results[0], results[1], n+1000, 2*n+1000)
	}
	// The start function takes its length and a host call; each entry
	// into count its length, and each of the n+1 times its loop's header
	// runs, the loop's; indirect its length. The budget carries from one
	// call to the next.
	sim := newBudgetSim()
	sim.charge(bodySize(startBody)+HostCallCost, 1)
	sim.charge(bodySize(countBody), 1)
	sim.charge(len(countLoop), n+1)
	sim.charge(bodySize(indirectBody), 1)
	sim.charge(bodySize(countBody), 1)
	sim.charge(len(countLoop), n+1)
	if int(checks.Load()) != sim.checks {
		t.Errorf("the check was called %d times, want %d", checks.Load(), sim.checks)
	}

	compiled, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), instrumented)
	if err != nil {
		t.Fatal(err)
	}
	if name := compiled.ExportedFunctions()["count"].Name(); name != "count_fn" {
		t.Errorf("count is named %q, want count_fn: the name section was not renumbered", name)
	}
	if name := compiled.ExportedFunctions()[EnterExport].Name(); name != EnterExport {
		t.Errorf("the entry function is named %q, want %s", name, EnterExport)
	}
	for _, s := range compiled.CustomSections() {
		if strings.HasPrefix(s.Name(), ".debug_") {
			t.Errorf("the rewrite kept DWARF section %s, whose offsets no longer hold", s.Name())
		}
	}
}

// shapeModule is a module of one import, env.note () -> (), and the
// functions funcs, all of type (i32) -> (i32), the first exported as "run"
// and alone in a table, for call_indirect; it has one page of memory.
func shapeModule(funcs ...[]byte) []byte {
	n := len(funcs)
	decls := make([][]byte, n)
	bodies := make([][]byte, n)
	table := []byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0x01} // active, offset 0: run
	for i, code := range funcs {
		decls[i] = []byte{0}
		bodies[i] = body(code)
	}
	return module(
		sec(1, vec([]byte{0x60, 1, 0x7f, 1, 0x7f}, []byte{0x60, 0, 0})),
		sec(2, vec(cat(str("env"), str("note"), []byte{0x00, 0x01}))),
		sec(3, vec(decls...)),
		sec(4, vec([]byte{0x70, 0x00, 0x01})),
		sec(5, vec([]byte{0x00, 0x01})),
		sec(7, vec(cat(str("run"), []byte{0x00, 0x01}))),
		sec(9, vec(table)),
		sec(10, vec(bodies...)),
	)
}

// Code of the shapes, for functions of type (i32) -> (i32) whose first
// defined function is index 1 (after env.note).
var (
	callSelf = func(fn byte) []byte { return []byte{0x20, 0x00, 0x10, fn} }                   // fn(n)
	callDown = func(fn byte) []byte { return []byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, fn} } // fn(n-1)
	// ifZeroReturn returns 0 when n is 0.
	ifZeroReturn = []byte{0x20, 0x00, 0x45, 0x04, 0x40, 0x41, 0x00, 0x0f, 0x0b}
	spinLoop     = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00}
)

// TestEveryShapeCallsCheck: whatever shape the code has, it reaches the
// check, which is how the host stops it. Each shape would run for hours
// or for good unchecked; the check stops it at its third call.
func TestEveryShapeCallsCheck(t *testing.T) {
	fill := cat([]byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x80, 0x80, 0x04, 0xfc, 0x0b, 0x00}) // memory.fill 0, 0, 64 KiB
	for _, tc := range []struct {
		name  string
		funcs [][]byte
	}{
		{"a loop", [][]byte{spinLoop}},
		{"a loop calling a leaf", [][]byte{cat([]byte{0x03, 0x40}, callSelf(2), []byte{0x1a, 0x0c, 0x00, 0x0b}, []byte{0x41, 0x00}), {0x20, 0x00}}},
		{"a loop calling the host", [][]byte{{0x03, 0x40, 0x10, 0x00, 0x0c, 0x00, 0x0b, 0x41, 0x00}}},
		{"a loop filling memory", [][]byte{cat([]byte{0x03, 0x40}, fill, []byte{0x0c, 0x00, 0x0b, 0x41, 0x00})}},
		{"recursion", [][]byte{callSelf(1)}},
		{"recursion calling the host", [][]byte{cat([]byte{0x10, 0x00}, callSelf(1))}},
		{"mutual recursion", [][]byte{callSelf(2), callSelf(1)}},
		{"indirect recursion", [][]byte{{0x20, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00}}},
		{"binary recursion", [][]byte{cat(ifZeroReturn, callDown(1), callDown(1), []byte{0x6a})}},
		{"a call tree without recursion", callTree(40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm, _, err := Instrument(shapeModule(tc.funcs...), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			stop := errors.New("stopped by the check")
			var checks atomic.Int32
			mod, _ := instance(t, wasm, func(context.Context, api.Module, []uint64) {
				if checks.Add(1) == 3 {
					panic(stop)
				}
			})
			if _, err := mod.ExportedFunction("run").Call(context.Background(), 40); !errors.Is(err, stop) {
				t.Fatalf("run returned %v after %d checks, want the check's panic at the third", err, checks.Load())
			}
		})
	}
}

// callTree is depth functions, each calling the next twice, the last a
// leaf: 2^depth calls, none recursive, no loop.
func callTree(depth int) [][]byte {
	funcs := make([][]byte, depth)
	for i := range depth - 1 {
		next := byte(i + 2)
		funcs[i] = cat(callSelf(next), callSelf(next), []byte{0x6a})
	}
	funcs[depth-1] = []byte{0x20, 0x00}
	return funcs
}

// TestCallsChargedWhereTheyRun: a leaf is charged its length where it is
// called, a host function HostCallCost, and a bulk instruction half the
// bytes it fills; an instrumented callee charges itself.
func TestCallsChargedWhereTheyRun(t *testing.T) {
	const turns = 100_000
	// run(n): a loop of n turns, each calling f(n) and dropping it.
	loopCalling := func(call []byte) []byte {
		return cat([]byte{0x03, 0x40}, call, []byte{0x1a},
			[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b}, // n--, br_if 0 while n != 0
			[]byte{0x41, 0x00})
	}
	loopLen := func(call []byte) int { return len(loopCalling(call)) - 2 }
	leaf := []byte{0x20, 0x00}
	withLoop := []byte{0x03, 0x40, 0x0b, 0x20, 0x00}
	fill := []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x80, 0x80, 0x04, 0xfc, 0x0b, 0x00, 0x20, 0x00} // memory.fill of 64 KiB, then n
	for _, tc := range []struct {
		name   string
		funcs  [][]byte
		charge func(s *budgetSim, turns int)
	}{
		{"a leaf", [][]byte{loopCalling(callSelf(2)), leaf}, func(s *budgetSim, turns int) {
			s.charge(loopLen(callSelf(2))+bodySize(leaf), turns)
		}},
		{"a function with a loop", [][]byte{loopCalling(callSelf(2)), withLoop}, func(s *budgetSim, turns int) {
			for range turns {
				s.charge(loopLen(callSelf(2)), 1)
				s.charge(bodySize(withLoop), 1)
				s.charge(3, 1) // its loop
			}
		}},
		{"the host", [][]byte{loopCalling([]byte{0x10, 0x00, 0x41, 0x00})}, func(s *budgetSim, turns int) {
			s.charge(loopLen([]byte{0x10, 0x00, 0x41, 0x00})+HostCallCost, turns)
		}},
		{"a leaf filling memory", [][]byte{loopCalling(callSelf(2)), fill}, func(s *budgetSim, turns int) {
			for range turns {
				s.charge(loopLen(callSelf(2))+bodySize(fill), 1)
				s.charge(64<<10>>bulkShift, 1)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm, _, err := Instrument(shapeModule(tc.funcs...), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			var checks atomic.Int32
			mod, _ := instance(t, wasm, func(context.Context, api.Module, []uint64) { checks.Add(1) })
			if _, err := mod.ExportedFunction("run").Call(context.Background(), turns); err != nil {
				t.Fatal(err)
			}
			sim := newBudgetSim()
			sim.charge(bodySize(tc.funcs[0]), 1) // run's entry
			tc.charge(sim, turns)
			if int(checks.Load()) != sim.checks {
				t.Errorf("%d checks, want %d", checks.Load(), sim.checks)
			}
		})
	}
}

// TestStackBound: a recursion finds the stack spent at the depth where its
// frames' estimates pass Options.StackBytes, and not before.
func TestStackBound(t *testing.T) {
	// run(n): depth++; if n == 0 return 0; return run(n-1)
	code := cat([]byte{0x23, 0x00, 0x41, 0x01, 0x6a, 0x24, 0x00}, ifZeroReturn, callDown(0))
	m := module(
		sec(1, vec([]byte{0x60, 1, 0x7f, 1, 0x7f})),
		sec(3, vec([]byte{0})),
		sec(6, vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		sec(7, vec(cat(str("run"), []byte{0x00, 0x00}), cat(str("depth"), []byte{0x03, 0x00}))),
		sec(10, vec(body(code))),
	)
	frame := FrameBytes(bodySize(code), 1, 1)
	const depth = 1000
	wasm, maxFrame, err := Instrument(m, Options{StackBytes: int32(depth * frame)})
	if err != nil {
		t.Fatal(err)
	}
	if maxFrame != frame {
		t.Errorf("the largest frame is %d, want %d", maxFrame, frame)
	}
	errStack := errors.New("stack spent")
	var atDepth uint64
	mod, _ := instance(t, wasm, func(_ context.Context, mod api.Module, stack []uint64) {
		if int32(stack[0]) < 0 {
			atDepth = mod.ExportedGlobal("depth").Get()
			panic(errStack)
		}
	})
	// depth frames fit, again and again: each return gives its frame back.
	for range 3 {
		mod.ExportedGlobal("depth").(api.MutableGlobal).Set(0)
		if _, err := mod.ExportedFunction("run").Call(context.Background(), depth-1); err != nil {
			t.Fatalf("a recursion %d deep: %v", depth, err)
		}
	}
	mod.ExportedGlobal("depth").(api.MutableGlobal).Set(0)
	if _, err := mod.ExportedFunction("run").Call(context.Background(), depth); !errors.Is(err, errStack) {
		t.Fatalf("a recursion %d deep: %v, want the stack spent", depth+1, err)
	}
	// The frame past the bound finds it spent at its entry, before its
	// code counts it.
	if atDepth != depth {
		t.Errorf("the stack was spent after %d frames, want %d", atDepth, depth)
	}
}

// TestEveryReturnGivesItsFrameBack: however a function returns (its end, a
// return, a branch to its outermost label, br_if, br_table, with one
// result or several), its frame goes back: called many times over a bound
// of a few frames, it never finds the stack spent, and answers as before.
func TestEveryReturnGivesItsFrameBack(t *testing.T) {
	two := []byte{0x60, 1, 0x7f, 2, 0x7f, 0x7f} // (i32) -> (i32, i32)
	for _, tc := range []struct {
		name string
		code []byte
		typ  []byte
		want uint64
	}{
		{"end", []byte{0x20, 0x00}, nil, 7},
		{"return", []byte{0x20, 0x00, 0x0f, 0x41, 0x00}, nil, 7},
		{"return in a block", []byte{0x02, 0x40, 0x20, 0x00, 0x0f, 0x0b, 0x41, 0x00}, nil, 7},
		{"br to the function", []byte{0x02, 0x40, 0x20, 0x00, 0x0c, 0x01, 0x0b, 0x41, 0x00}, nil, 7},
		{"br_if to the function", []byte{0x20, 0x00, 0x41, 0x01, 0x0d, 0x00, 0x1a, 0x41, 0x00}, nil, 7},
		{"br_table to the function", []byte{0x20, 0x00, 0x41, 0x00, 0x0e, 0x00, 0x00, 0x41, 0x00}, nil, 7},
		{"two results", []byte{0x20, 0x00, 0x20, 0x00, 0x0f}, two, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ := tc.typ
			if typ == nil {
				typ = []byte{0x60, 1, 0x7f, 1, 0x7f}
			}
			// run(n) calls f(7) n times; f is referenced by ref.func, so
			// that it is instrumented.
			loop := cat([]byte{0x03, 0x40, 0x41, 0x07, 0x10, 0x01}, bytes.Repeat([]byte{0x1a}, len(typ)-4),
				[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b, 0x41, 0x07, 0x10, 0x01})
			run := cat(loop, bytes.Repeat([]byte{0x1a}, len(typ)-5), []byte{0xd2, 0x01, 0x1a})
			m := module(
				sec(1, vec([]byte{0x60, 1, 0x7f, 1, 0x7f}, typ)),
				sec(3, vec([]byte{0}, []byte{1})),
				sec(7, vec(cat(str("run"), []byte{0x00, 0x00}))),
				sec(9, vec([]byte{0x03, 0x00, 0x01, 0x01})), // declarative: f
				sec(10, vec(body(run), body(tc.code))),
			)
			frame := FrameBytes(bodySize(tc.code), 1, len(typ)-4)
			wasm, _, err := Instrument(m, Options{StackBytes: int32(3*frame + FrameBytes(bodySize(run), 1, 1))})
			if err != nil {
				t.Fatal(err)
			}
			mod, _ := instance(t, wasm, func(_ context.Context, _ api.Module, stack []uint64) {
				if int32(stack[0]) < 0 {
					panic("stack spent")
				}
			})
			res, err := mod.ExportedFunction("run").Call(context.Background(), 100_000)
			if err != nil {
				t.Fatal(err)
			}
			if res[0] != tc.want {
				t.Errorf("run = %d, want %d", res[0], tc.want)
			}
		})
	}
}

// TestEnter: the entry function calls each named export with its
// parameters and returns its result as an i64; an entry the module lacks,
// or cannot be passed, traps.
func TestEnter(t *testing.T) {
	m := module(
		sec(1, vec(
			[]byte{0x60, 0, 1, 0x7f},             // version: () -> i32
			[]byte{0x60, 1, 0x7f, 1, 0x7f},       // alloc: (i32) -> i32
			[]byte{0x60, 1, 0x7e, 0},             // deadline: (i64) -> ()
			[]byte{0x60, 2, 0x7f, 0x7f, 1, 0x7e}, // method: (i32, i32) -> i64
			[]byte{0x60, 1, 0x7d, 0},             // float: (f32) -> ()
		)),
		sec(3, vec([]byte{0}, []byte{1}, []byte{2}, []byte{3}, []byte{4})),
		sec(6, vec([]byte{0x7e, 0x01, 0x42, 0x00, 0x0b})),
		sec(7, vec(
			cat(str("version"), []byte{0x00, 0x00}),
			cat(str("alloc"), []byte{0x00, 0x01}),
			cat(str("deadline"), []byte{0x00, 0x02}),
			cat(str("method"), []byte{0x00, 0x03}),
			cat(str("float"), []byte{0x00, 0x04}),
			cat(str("last"), []byte{0x03, 0x00}),
		)),
		sec(10, vec(
			body([]byte{0x41, 0x7f}),                                                 // -1
			body([]byte{0x20, 0x00, 0x41, 0x01, 0x6a}),                               // n + 1
			body([]byte{0x20, 0x00, 0x24, 0x00}),                                     // last = d
			body([]byte{0x20, 0x00, 0xad, 0x42, 0x20, 0x86, 0x20, 0x01, 0xad, 0x84}), // a<<32 | b
			body(nil),
		)),
	)
	wasm, _, err := Instrument(m, Options{StackBytes: 1 << 20, Entries: []string{"version", "alloc", "deadline", "method", "float", "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := instance(t, wasm, func(context.Context, api.Module, []uint64) {})
	enter := mod.ExportedFunction(EnterExport)
	for _, tc := range []struct {
		entry, a, b uint64
		want        uint64
	}{
		{0, 0, 0, 0xffffffff},
		{1, 41, 0, 42},
		{1, 1<<32 | 41, 0, 42}, // an i32 parameter takes the low half
		{2, 1 << 40, 0, 0},
		{3, 3, 5, 3<<32 | 5},
	} {
		res, err := enter.Call(context.Background(), tc.entry, tc.a, tc.b)
		if err != nil || res[0] != tc.want {
			t.Errorf("enter(%d, %d, %d) = %v, %v; want %#x", tc.entry, tc.a, tc.b, res, err, tc.want)
		}
	}
	if last := mod.ExportedGlobal("last").Get(); last != 1<<40 {
		t.Errorf("deadline was passed %d, want %d", last, uint64(1)<<40)
	}
	for _, entry := range []uint64{4, 5, 6} {
		if _, err := enter.Call(context.Background(), entry, 0, 0); err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("enter(%d): %v, want a trap", entry, err)
		}
	}
}

func TestInstrumentRefuses(t *testing.T) {
	fn := func(code []byte) []byte {
		return module(sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})), sec(10, vec(body(code))))
	}
	for _, tc := range []struct {
		name, want string
		wasm       []byte
	}{
		{"not Wasm", "not a Wasm binary", []byte("\x7fELF")},
		{"truncated section", "truncated section", append(module(), 1, 10, 0)},
		{"unknown section", "unknown section 13", module(sec(13, []byte{0}))},
		{"unknown instruction", "unknown instruction 0xfb", fn([]byte{0xfb, 0x00})},
		{"a tail call", "tail calls", fn([]byte{0x12, 0x00})},
		{"a global past the module's", "reference to global 0, past the module's 0", fn([]byte{0x41, 0x00, 0x24, 0x00})},
		{"an export of it", "reference to global 1, past the module's 1", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(6, vec([]byte{0x7f, 0x00, 0x41, 0x00, 0x0b})),
			sec(7, vec(cat(str("g"), []byte{0x03, 0x01}))),
			sec(10, vec(body(nil))))},
		{"the entry's name", "reserves", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(7, vec(cat(str(EnterExport), []byte{0x00, 0x00}))),
			sec(10, vec(body(nil))))},
		{"no functions", "defines no functions", module(sec(6, vec([]byte{0x7f, 0x00, 0x41, 0x00, 0x0b})))},
		{"code without end", "code ends without end", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(10, vec(sized([]byte{0x00, 0x01})))),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Instrument(tc.wasm, testOptions); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Instrument = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPaddedSleb(t *testing.T) {
	for _, v := range []int32{1, 63, 64, 1 << 20, 1<<31 - 1} {
		b := make([]byte, paddedSlebLen)
		putPaddedSleb(b, v)
		if got, n := readSleb(b); n != paddedSlebLen || got != int64(v) {
			t.Errorf("putPaddedSleb(%d) = %x, reads back as %d over %d bytes", v, b, got, n)
		}
	}
}

// readSleb reads a signed LEB128, returning its value and length.
func readSleb(b []byte) (int64, int) {
	var v int64
	var shift uint
	for i, c := range b {
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// Assembly helpers.

func module(sections ...[]byte) []byte {
	return cat(append([][]byte{[]byte("\x00asm\x01\x00\x00\x00")}, sections...)...)
}

func sec(id byte, content []byte) []byte { return cat([]byte{id}, sized(content)) }

func sized(b []byte) []byte { return cat(binary.AppendUvarint(nil, uint64(len(b))), b) }

func vec(items ...[]byte) []byte {
	return cat(append([][]byte{binary.AppendUvarint(nil, uint64(len(items)))}, items...)...)
}

func str(s string) []byte { return sized([]byte(s)) }

// body is a function body without locals.
func body(code []byte) []byte { return sized(cat([]byte{0x00}, code, []byte{0x0b})) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
