package host

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

// Hostile modules that try to grow the host's memory through its host
// functions. Each measures the host heap (the guest's linear memory is
// mapped outside it) and holds it to the module's shared state budget and
// exhaustSlack, the most one call may add to it besides.

// exhaustSlack is what a module may add to the host heap beyond its shared
// state budget during one call, for the pending result, metric series and
// the collector's granularity.
const exhaustSlack = 1 << 20

// exhaustBudget is the shared state budget of the modules here: small, so
// that what escapes it shows.
const exhaustBudget = 1 << 20

// Host function imports, in the order hostileModule declares them: call
// them with wt.Call(importX).
const (
	importStateGet = iota
	importStateSet
	importCredential
	importLog
	importHTTPDo
)

var hostileImports = []wt.Import{
	{Module: abi.ImportModule, Name: abi.ImportStateGet, Params: []byte{wt.I32, wt.I32, wt.I64, wt.I32}, Results: []byte{wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportStateSet, Params: []byte{wt.I32, wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportCredential, Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportLog, Params: []byte{wt.I32, wt.I32, wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportHTTPDo, Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}},
}

// counterAddr holds the loop counter of repeat, and is the start of every
// key the hostile modules use, so that each iteration's key is new.
const counterAddr = 0

// repeat runs body n times, counting in guest memory at counterAddr.
func repeat(n int32, body []byte) []byte {
	load := []byte{0x28, 0x02, 0x00}  // i32.load
	store := []byte{0x36, 0x02, 0x00} // i32.store
	return wt.Seq(
		[]byte{0x02, 0x40, 0x03, 0x40}, // block, loop
		// Out of the block once the counter is n.
		wt.I32Const(counterAddr), load, wt.I32Const(n), []byte{0x46, 0x0d, 0x01},
		body,
		// The counter plus one, then back to the loop's start.
		wt.I32Const(counterAddr), wt.I32Const(counterAddr), load, wt.I32Const(1), []byte{0x6a}, store,
		[]byte{0x0c, 0x00, 0x0b, 0x0b}, // br 0, end loop, end block
	)
}

// measure calls log, which the test's Config.Log turns into a heap
// measurement taken while the call, and what it holds, is still running.
var measure = wt.Seq(wt.I32Const(int32(abi.LogError)), wt.I32Const(0), wt.I32Const(1), wt.Call(importLog))

// answerFalse returns exists' answer: status OK, false.
var answerFalse = wt.Seq(wt.StoreBytes(3000, []byte{0, 0}), wt.I64Const(int64(abi.PackResult(3000, 2))))

// hostileModule is abiModule whose exists export runs body and answers
// false, with the host functions imported and pages of memory.
func hostileModule(body []byte, pages uint32) []byte {
	return abiModule(wt.Seq(body, answerFalse), func(m *wt.Module) {
		m.Imports = hostileImports
		m.MemoryPages = pages
	})
}

// heapGrowth is how much the live host heap grew since base.
func heapGrowth(base uint64) int64 { return int64(heapAlloc()) - int64(base) }

// heapAlloc is the live host heap, after a collection, so that garbage
// of earlier calls and tests does not count.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// runHostile loads wasm with a shared state budget, calls its exists export
// once and returns the host heap's growth: the largest of what the module's
// measure points saw and of what remains after the call.
func runHostile(t *testing.T, name string, wasm []byte, budget int) (growth int64, err error) {
	t.Helper()
	var base uint64
	var peak int64
	mod, err := New(context.Background(), wasm, Config{Name: name, PoolSize: 1, CallTimeout: 10 * time.Second,
		SharedStateBytes: budget,
		Log: func(abi.LogLevel, string) {
			peak = max(peak, heapGrowth(base))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	base = heapAlloc()
	err = mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, new(abi.Bool))
	return max(peak, heapGrowth(base)), err
}

// TestClaimsAreBounded: a module that claims key after key in one call,
// never filling any, is refused claims once they take their share of the
// budget, and the host heap stays within the budget.
func TestClaimsAreBounded(t *testing.T) {
	const claims = 100_000
	claimNext := wt.Seq(wt.I32Const(counterAddr), wt.I32Const(abi.MaxStateKeyBytes), wt.I64Const(-1), wt.I32Const(1),
		wt.Call(importStateGet), wt.Drop)
	growth, err := runHostile(t, "claims", hostileModule(wt.Seq(repeat(claims, claimNext), measure), 1), exhaustBudget)
	if err != nil {
		t.Fatal(err)
	}
	lookups, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "wasmccm_module_state_lookups_total",
		map[string]string{"module": "claims"}, "result")
	if err != nil {
		t.Fatal(err)
	}
	refused := lookups["claim_refused"]
	t.Logf("%d claims of %d-byte keys: host heap grew by %d KiB (budget %d KiB), %v refused",
		claims, abi.MaxStateKeyBytes, growth>>10, exhaustBudget>>10, refused)
	if growth > exhaustBudget+exhaustSlack {
		t.Errorf("host heap grew by %d KiB, more than the budget and slack", growth>>10)
	}
	if refused == 0 {
		t.Errorf("no claim was refused")
	}
}

// TestStateFillIsBounded: a module that stores ever new small keys, each
// costing the host the most for the bytes it counts, then a few entries
// of the largest size, which evict the small ones, keeps the host heap
// within its budget throughout.
func TestStateFillIsBounded(t *testing.T) {
	const (
		budget  = 8 << 20
		entries = 100_000
		large   = budget/4 - 1024
	)
	setNext := wt.Seq(wt.I32Const(counterAddr), wt.I32Const(8), wt.I32Const(0), wt.I32Const(1),
		wt.Call(importStateSet), wt.Drop)
	var setLarge []byte
	for keyLen := int32(1); keyLen <= 4; keyLen++ { // keys of zeros, told apart by their length
		setLarge = wt.Seq(setLarge, wt.I32Const(8), wt.I32Const(keyLen), wt.I32Const(0), wt.I32Const(large),
			wt.Call(importStateSet), wt.Drop)
	}
	body := wt.Seq(repeat(entries, setNext), measure, setLarge, measure)
	growth, err := runHostile(t, "fill", hostileModule(body, budget>>16), budget)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries of an 8-byte key and a 1-byte value, then 4 of %d KiB: host heap grew by at most %d KiB (budget %d KiB)",
		entries, large>>10, growth>>10, budget>>10)
	if growth > budget+exhaustSlack {
		t.Errorf("host heap grew by %d KiB, more than the budget and slack", growth>>10)
	}
}

// TestOversizedArgumentsNotCopied: a module that hands a host function an
// argument far over its limit gets a refusal, and the host allocates
// nothing of its size: lengths are checked before guest memory is copied.
func TestOversizedArgumentsNotCopied(t *testing.T) {
	const (
		pages = 1600 // 100 MiB
		huge  = pages << 16
	)
	cases := []struct {
		name string
		call []byte
		// abort is the ABI violation the call ends with; empty when the
		// host function refuses with an errno instead.
		abort string
	}{
		{"state_set value", wt.Seq(wt.I32Const(counterAddr), wt.I32Const(4), wt.I32Const(0), wt.I32Const(huge),
			wt.Call(importStateSet), wt.Drop), ""},
		{"credential name", wt.Seq(wt.I32Const(0), wt.I32Const(huge), wt.Call(importCredential), wt.Drop), ""},
		{"log line", wt.Seq(wt.I32Const(int32(abi.LogError)), wt.I32Const(0), wt.I32Const(huge), wt.Call(importLog)), ""},
		{"http_do request", wt.Seq(wt.I32Const(0), wt.I32Const(huge), wt.Call(importHTTPDo), wt.Drop),
			"exceeds the 1048576-byte limit"},
		// Within the request's byte limit, but every two bytes an empty
		// header, each of which costs the host far more once decoded.
		{"http_do headers", wt.Seq(wt.StoreBytes(0, emptyHeaders(1<<20)), wt.I32Const(0), wt.I32Const(1<<20),
			wt.Call(importHTTPDo), wt.Drop), "malformed"},
		{"state key", wt.Seq(wt.I32Const(0), wt.I32Const(huge), wt.I64Const(-1), wt.I32Const(1), wt.Call(importStateGet), wt.Drop),
			"exceeds the 512-byte limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mod, err := New(context.Background(), hostileModule(tc.call, pages), Config{Name: "oversized", PoolSize: 1,
				CallTimeout: 10 * time.Second, SharedStateBytes: exhaustBudget, Log: func(abi.LogLevel, string) {}})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			before := totalAlloc()
			err = mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, new(abi.Bool))
			allocated := totalAlloc() - before
			t.Logf("%s: the host allocated %d KiB", tc.name, allocated>>10)
			if tc.abort == "" && err != nil {
				t.Fatal(err)
			}
			if tc.abort != "" && (err == nil || !strings.Contains(err.Error(), tc.abort)) {
				t.Fatalf("err = %v, want an ABI violation containing %q", err, tc.abort)
			}
			if allocated > exhaustSlack {
				t.Fatalf("the host allocated %d KiB for a call given a %d MiB argument", allocated>>10, huge>>20)
			}
		})
	}
}

// emptyHeaders is the start of an HTTPRequest of size bytes: empty method
// and URL, then as many empty headers as the rest holds.
func emptyHeaders(size int) []byte {
	return binary.AppendUvarint([]byte{0, 0}, uint64(size-5)/2)
}
