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

func testModule() []byte {
	countBody := cat([]byte{0x02, 0x40}, countLoop, []byte{0x0b}, // block ... end
		[]byte{0x23, 0x01, 0x23, 0x00, 0x6a}) // turns + base
	indirectBody := []byte{0x20, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00} // call_indirect type 0, table 0
	startBody := []byte{0x10, fnNote}
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
// and the check counting its own; the runtime has no check of its own.
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
		WithGoModuleFunction(check, nil, nil).Export(ImportName).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return mod, &notes
}

func TestInstrumentedModuleRunsAsBefore(t *testing.T) {
	original := testModule()
	instrumented, err := Instrument(original)
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int32
	counting := func(context.Context, api.Module, []uint64) { checks.Add(1) }
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
	// Each turn, and the last entry that leaves, costs the loop's length;
	// the check comes when the budget is spent, which the instance's
	// counter carries from one call to the next.
	turnsPerCheck := (Budget + len(countLoop) - 1) / len(countLoop)
	if want := 2 * (n + 1) / turnsPerCheck; int(checks.Load()) != want {
		t.Errorf("the check was called %d times over 2×%d turns, want %d", checks.Load(), n+1, want)
	}

	compiled, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), instrumented)
	if err != nil {
		t.Fatal(err)
	}
	if name := compiled.ExportedFunctions()["count"].Name(); name != "count_fn" {
		t.Errorf("count is named %q, want count_fn: the name section was not renumbered", name)
	}
	for _, s := range compiled.CustomSections() {
		if strings.HasPrefix(s.Name(), ".debug_") {
			t.Errorf("the rewrite kept DWARF section %s, whose offsets no longer hold", s.Name())
		}
	}
}

// TestLoopCallsCheck: a loop that never ends calls the check, which is how
// the host stops it; a module without imports or globals gets both.
func TestLoopCallsCheck(t *testing.T) {
	spin := module(
		sec(1, vec([]byte{0x60, 0, 0})),
		sec(3, vec([]byte{0})),
		sec(7, vec(cat(str("spin"), []byte{0x00, 0x00}))),
		sec(10, vec(body([]byte{0x03, 0x40, 0x0c, 0x00, 0x0b}))),
	)
	instrumented, err := Instrument(spin)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stopped by the check")
	var checks atomic.Int32
	mod, _ := instance(t, instrumented, func(context.Context, api.Module, []uint64) {
		if checks.Add(1) == 3 {
			panic(stop)
		}
	})
	_, err = mod.ExportedFunction("spin").Call(context.Background())
	if !errors.Is(err, stop) || checks.Load() != 3 {
		t.Fatalf("spin returned %v after %d checks, want the check's panic at the third", err, checks.Load())
	}
}

func TestInstrumentRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		wasm       []byte
	}{
		{"not Wasm", "not a Wasm binary", []byte("\x7fELF")},
		{"truncated section", "truncated section", append(module(), 1, 10, 0)},
		{"unknown section", "unknown section 13", module(sec(13, []byte{0}))},
		{"unknown instruction", "unknown instruction 0xfb", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(10, vec(body([]byte{0xfb, 0x00})))),
		},
		{"a global past the module's", "reference to global 0, past the module's 0", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(10, vec(body([]byte{0x41, 0x00, 0x24, 0x00})))),
		},
		{"an export of it", "reference to global 1, past the module's 1", module(
			sec(6, vec([]byte{0x7f, 0x00, 0x41, 0x00, 0x0b})),
			sec(7, vec(cat(str("g"), []byte{0x03, 0x01})))),
		},
		{"code without end", "code ends without end", module(
			sec(1, vec([]byte{0x60, 0, 0})), sec(3, vec([]byte{0})),
			sec(10, vec(sized([]byte{0x00, 0x01})))),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Instrument(tc.wasm); err == nil || !strings.Contains(err.Error(), tc.want) {
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
