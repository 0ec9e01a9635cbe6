package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

// TestDeadlineExport: a guest exporting wasmccm_set_deadline is told,
// before init and before every call, the time left in that call, bounded
// by CallTimeout or by the caller's own deadline, whichever ends first.
func TestDeadlineExport(t *testing.T) {
	const slack = 500 * time.Millisecond
	cases := []struct {
		name           string
		callTimeout    time.Duration
		callerDeadline time.Duration // 0: none
		want           time.Duration
	}{
		{"call timeout", 2 * time.Second, 0, 2 * time.Second},
		{"caller's deadline first", 30 * time.Second, time.Second, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wasm := abiModule(answerTrueIfTimeLeftIn(tc.want-slack, tc.want), exportSetDeadline)
			mod, err := New(context.Background(), wasm, Config{Name: "deadline", PoolSize: 1, CallTimeout: tc.callTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			ctx := context.Background()
			if tc.callerDeadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.callerDeadline)
				defer cancel()
			}
			// Twice: the guest forgets the value once it used it.
			for range 2 {
				var exists abi.Bool
				if err := mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "n"}, &exists); err != nil || !exists {
					t.Fatalf("exists = %v, err = %v: the guest was told no time left in (%s, %s]", exists, err, tc.want-slack, tc.want)
				}
			}
		})
	}
}

// TestWithoutDeadlineExport: a module built before revision 4, without
// wasmccm_set_deadline, loads and serves calls as before.
func TestWithoutDeadlineExport(t *testing.T) {
	answerTrue := abi.EncodeResult(nil, abi.Outcome{Status: abi.StatusOK}, ptr(abi.Bool(true)))
	wasm := abiModule(wt.Seq(wt.StoreBytes(3000, answerTrue), wt.I64Const(int64(abi.PackResult(3000, uint32(len(answerTrue)))))), nil)
	mod, err := New(context.Background(), wasm, Config{Name: "no-deadline", PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	var exists abi.Bool
	if err := mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, &exists); err != nil || !exists {
		t.Fatalf("exists = %v, err = %v", exists, err)
	}
}

// TestDeadlineExportWrongSignature: a module exporting
// wasmccm_set_deadline with another signature is refused at load, rather
// than called with arguments it does not expect.
func TestDeadlineExportWrongSignature(t *testing.T) {
	wasm := abiModule(okEmpty, func(m *wt.Module) {
		m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportSetDeadline, Params: []byte{wt.I32}})
	})
	const want = "export wasmccm_set_deadline has signature (i32) -> (), want (i64) -> ()"
	mod, err := New(context.Background(), wasm, Config{Name: "bad-deadline"})
	if err == nil {
		mod.Close(context.Background())
		t.Fatalf("module accepted, want error %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
}

// TestSDKContextDeadline: a provider built with the SDK finds the call's
// deadline on the context its methods get.
func TestSDKContextDeadline(t *testing.T) {
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, nil)
			var got abi.String
			if err := f.mod.Call(context.Background(), abi.ExportInstanceType, ptr(abi.String("time-left")), &got); err != nil {
				t.Fatal(err)
			}
			left, err := time.ParseDuration(string(got))
			if err != nil {
				t.Fatalf("answer %q: %v", got, err)
			}
			if timeout := f.mod.cfg.CallTimeout; left > timeout || left < timeout-time.Second {
				t.Fatalf("time left in the call = %s, want just under the %s call timeout", left, timeout)
			}
		})
	}
}

// timeLeftAddr is where the assembled guests keep the time left that
// wasmccm_set_deadline was given.
const timeLeftAddr = 4000

// exportSetDeadline adds a wasmccm_set_deadline that stores its argument
// at timeLeftAddr, and makes init trap unless it was called first.
func exportSetDeadline(m *wt.Module) {
	const i64Store, i64GtS, ifI64, elseOp, endOp = 0x37, 0x55, 0x04, 0x05, 0x0b
	m.Funcs = append(m.Funcs, wt.Func{
		Export: abi.ExportSetDeadline, Params: []byte{wt.I64},
		Body: wt.Seq(wt.I32Const(timeLeftAddr), localGet0, []byte{i64Store, 0x03, 0x00}),
	})
	m.Funcs[funcIndex(m, abi.ExportInit)].Body = wt.Seq(
		loadTimeLeft, wt.I64Const(0), []byte{i64GtS, ifI64, wt.I64},
		okEmpty, []byte{elseOp}, wt.Unreachable, []byte{endOp},
	)
}

// answerTrueIfTimeLeftIn is an exists body that answers true when the
// time left stored by wasmccm_set_deadline is in [lo, hi], and traps
// otherwise; it clears the stored value so that each call needs its own.
func answerTrueIfTimeLeftIn(lo, hi time.Duration) []byte {
	const (
		i64GeS, i64LeS, i32And, i64Store = 0x59, 0x57, 0x71, 0x37
		ifI64, elseOp, endOp             = 0x04, 0x05, 0x0b
	)
	result := abi.EncodeResult(nil, abi.Outcome{Status: abi.StatusOK}, ptr(abi.Bool(true)))
	return wt.Seq(
		wt.StoreBytes(3000, result),
		loadTimeLeft, wt.I64Const(int64(lo)), []byte{i64GeS},
		loadTimeLeft, wt.I64Const(int64(hi)), []byte{i64LeS},
		[]byte{i32And},
		wt.I32Const(timeLeftAddr), wt.I64Const(0), []byte{i64Store, 0x03, 0x00},
		[]byte{ifI64, wt.I64},
		wt.I64Const(int64(abi.PackResult(3000, uint32(len(result))))),
		[]byte{elseOp}, wt.Unreachable, []byte{endOp},
	)
}

var (
	localGet0    = []byte{0x20, 0x00}
	loadTimeLeft = wt.Seq(wt.I32Const(timeLeftAddr), []byte{0x29, 0x03, 0x00}) // i64.load
)
