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
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.cfg.Name = "bounds"
			mod, err := New(context.Background(), tc.wasm, tc.cfg)
			if err == nil {
				mod.Close(context.Background())
				t.Fatal("module accepted")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("refusal took %s", took)
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
