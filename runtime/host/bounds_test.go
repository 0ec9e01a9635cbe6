package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

// manyFunctions is abiModule plus n empty functions: 600,000 of them make a
// module of a few MB that gzips to under a MB, small enough for a ConfigMap.
func manyFunctions(n int) []byte {
	return abiModule(okEmpty, func(m *wt.Module) {
		for range n {
			m.Funcs = append(m.Funcs, wt.Func{})
		}
	})
}

// refusalQuick is a refusal's time that proves it compiled nothing on any
// machine; a slower one, which a loaded machine can take, is held to
// the compilation it avoids, timed under the same load.
const refusalQuick = time.Second

// compileTime is how long New takes to compile wasm in full.
func compileTime(t *testing.T, wasm []byte) time.Duration {
	t.Helper()
	start := time.Now()
	mod, err := New(context.Background(), wasm, Config{Name: "bounds-reference"})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	mod.Close(context.Background())
	return took
}

// TestCompilationBounds: a module over a compilation bound is refused by
// New and Validate with an error naming the bound, before wazero decodes
// it, hence in milliseconds and without its memory.
func TestCompilationBounds(t *testing.T) {
	huge := manyFunctions(600_000)
	cases := []struct {
		name    string
		wasm    []byte
		cfg     Config
		wantErr string
	}{
		{"600,000 functions", huge, Config{}, "module defines 600006 functions, more than the 50000 the host compiles"},
		{"code over the limit", abiModule(okEmpty, nil), Config{MaxCodeBytes: 16}, "bytes of code, more than the 16 the host compiles"},
		{"compilation past its deadline", manyFunctions(20_000), Config{CompileTimeout: time.Millisecond}, "compiling the module took longer than 1ms"},
	}
	// fullCompile is how long compiling the deadline case's module takes
	// now, the work a refusal must not do: it is measured only for a
	// refusal slow enough to be in doubt, under the same load.
	var fullCompile time.Duration
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.cfg.Name = "bounds"
			mod, err := New(context.Background(), tc.wasm, tc.cfg)
			took := time.Since(start)
			if err == nil {
				mod.Close(context.Background())
				t.Fatal("module accepted")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
			}
			if took < refusalQuick {
				return
			}
			if fullCompile == 0 {
				fullCompile = compileTime(t, manyFunctions(20_000))
			}
			if took > fullCompile/4 {
				t.Errorf("refusal took %s, more than a quarter of compiling a 20,000-function module (%s)", took, fullCompile)
			}
		})
	}
	// Validate, as `wasmccm validate` runs it, applies the default bounds.
	_, problems := Validate(context.Background(), huge, "")
	var bounds *BoundsError
	if len(problems) != 1 || !strings.Contains(problems[0], "600006 functions") {
		t.Fatalf("Validate: %q, want the function bound", problems)
	}
	if err := checkBounds(huge, Config{}.withDefaults()); !errors.As(err, &bounds) || bounds.Have != 600_006 {
		t.Fatalf("checkBounds = %v", err)
	}
}
