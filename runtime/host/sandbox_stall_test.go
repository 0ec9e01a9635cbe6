package host

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

// Guests that stall: they sleep through WASI's poll_oneoff, as Go, TinyGo
// and Rust implement time.Sleep, or spin. Every one imports stallImports,
// so that function indices are fixed.
const (
	stallPollOneoff uint32 = iota
	stallLog
	stallStateGet
	stallStateDelete
)

var stallImports = []wt.Import{
	{Module: "wasi_snapshot_preview1", Name: "poll_oneoff", Params: []byte{wt.I32, wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportLog, Params: []byte{wt.I32, wt.I32, wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportStateGet, Params: []byte{wt.I32, wt.I32, wt.I64, wt.I32}, Results: []byte{wt.I32}},
	{Module: abi.ImportModule, Name: abi.ImportStateDelete, Params: []byte{wt.I32, wt.I32}},
}

// guestSleep is longer than every deadline in these tests, and short
// enough that a host which lets it run out shows in a few seconds.
const guestSleep = 5 * time.Second

// Guest memory these guests use, past what abiModule's bodies write.
const (
	subscriptionAt = 8192 // poll_oneoff's subscription, event and count
	messageAt      = 9000 // a log line or state key
)

// sleep is poll_oneoff with one relative clock subscription of d, then a
// write to guest memory, which a host that unmapped it would crash on.
func sleep(d time.Duration) []byte {
	return wt.Seq(
		wt.StoreBytes(subscriptionAt+24, binary.LittleEndian.AppendUint64(nil, uint64(d))),
		wt.I32Const(subscriptionAt), wt.I32Const(subscriptionAt+48), wt.I32Const(1), wt.I32Const(subscriptionAt+80),
		wt.Call(stallPollOneoff), wt.Drop,
		wt.StoreBytes(subscriptionAt+96, []byte("woke")),
	)
}

// logLine tells the test the guest got this far (Config.Log runs in the
// guest's call).
func logLine(msg string) []byte {
	return wt.Seq(wt.StoreBytes(messageAt, []byte(msg)),
		wt.I32Const(int32(abi.LogInfo)), wt.I32Const(messageAt), wt.I32Const(int32(len(msg))), wt.Call(stallLog))
}

// ifStateHas runs then when the shared state holds key.
func ifStateHas(key string, then []byte) []byte {
	return wt.Seq(wt.StoreBytes(messageAt, []byte(key)),
		wt.I32Const(messageAt), wt.I32Const(int32(len(key))), wt.I64Const(-1), wt.I32Const(0), wt.Call(stallStateGet),
		wt.I32Const(int32(abi.ErrnoNotFound)), []byte{0x47}, // i32.ne
		[]byte{0x04, 0x40}, then, []byte{0x0b}) // if ... end
}

// growMemory grows the guest's memory by a page, past a one-page
// high-water mark: the instance is recycled after the call.
var growMemory = wt.Seq(wt.I32Const(1), []byte{0x40, 0x00}, wt.Drop)

// stallModule is abiModule with stallImports, edited by edit.
func stallModule(edit func(*wt.Module)) []byte {
	return abiModule(okEmpty, func(m *wt.Module) {
		m.Imports = stallImports
		edit(m)
	})
}

func setBody(export string, body []byte) func(*wt.Module) {
	return func(m *wt.Module) { m.Funcs[funcIndex(m, export)].Body = body }
}

// signalOn returns a Config.Log that closes the returned channel at the
// first line equal to msg.
func signalOn(msg string) (func(abi.LogLevel, string), <-chan struct{}) {
	seen := make(chan struct{})
	var once sync.Once
	return func(_ abi.LogLevel, line string) {
		if line == msg {
			once.Do(func() { close(seen) })
		}
	}, seen
}

// TestSleepingExportStopsAtDeadline: an export sleeping in poll_oneoff
// past its deadline, the call timeout's or the caller's, fails as a
// timeout within abortMargin of it, and the module answers the next call.
func TestSleepingExportStopsAtDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	mod, err := New(context.Background(), stallModule(setBody(abi.ExportInstanceExists, wt.Seq(sleep(guestSleep), okEmpty))),
		Config{Name: "sleeper", PoolSize: 1, CallTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())
	for _, tc := range []struct {
		name           string
		callerDeadline time.Duration // none when zero
		wantErr        string
	}{
		{"call timeout", 0, "ran past the 300ms call timeout; the instance was stopped"},
		{"caller's deadline", 100 * time.Millisecond, "context deadline exceeded; the instance was stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, deadline := context.Background(), timeout
			if tc.callerDeadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.callerDeadline)
				defer cancel()
				deadline = tc.callerDeadline
			}
			start := time.Now()
			err := mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "n"}, new(abi.Bool))
			took := time.Since(start)
			var failure *FailureError
			if !errors.As(err, &failure) || failure.Reason != ReasonTimeout || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want a timeout containing %q", err, tc.wantErr)
			}
			if took > deadline+abortMargin {
				t.Fatalf("the call returned after %s, past its %s deadline and the %s margin", took, deadline, abortMargin)
			}
			t.Logf("returned %s after a %s deadline", took-deadline, deadline)
			if err := mod.Call(context.Background(), abi.ExportInstanceShutdown, &abi.Node{}, nil); err != nil {
				t.Fatalf("the next call: %v", err)
			}
		})
	}
}

// TestHangingStartUpFailsNew: a module whose start function, ABI version
// export or init sleeps or spins is refused by New, with an error naming
// the call timeout, in that timeout and abortMargin beyond what a healthy
// module's New takes; Validate is bounded likewise.
func TestHangingStartUpFailsNew(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cfg := Config{Name: "hanging-start", CallTimeout: timeout}
	start := time.Now()
	healthy, err := New(context.Background(), stallModule(func(*wt.Module) {}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	healthy.Close(context.Background())
	bound := time.Since(start) + timeout + abortMargin
	for _, tc := range []struct {
		name     string
		edit     func(*wt.Module)
		wantErr  string // names the part that hung and the timeout
		validate bool   // Validate runs this part too
	}{
		{"start function sleeps", func(m *wt.Module) {
			m.Funcs = append(m.Funcs, wt.Func{Export: "_initialize", Body: sleep(guestSleep)})
		}, "start functions stopped: ran past the 300ms call timeout", true},
		{"start function spins", func(m *wt.Module) {
			m.Funcs = append(m.Funcs, wt.Func{Export: "_initialize", Body: wt.LoopForever})
		}, "start functions stopped: ran past the 300ms call timeout", true},
		{"ABI version sleeps", setBody(abi.ExportABIVersion, wt.Seq(sleep(guestSleep), wt.I32Const(abi.Version))),
			"wasmccm_abi_version: module call failed (timeout): ran past the 300ms call timeout", true},
		{"init sleeps", setBody(abi.ExportInit, wt.Seq(sleep(guestSleep), okEmpty)),
			"wasmccm_init: module call failed (timeout): ran past the 300ms call timeout", false},
		{"init spins", setBody(abi.ExportInit, wt.Seq(wt.LoopForever, okEmpty)),
			"wasmccm_init: module call failed (timeout): ran past the 300ms call timeout", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := stallModule(tc.edit)
			start := time.Now()
			mod, err := New(context.Background(), wasm, cfg)
			took := time.Since(start)
			if err == nil {
				mod.Close(context.Background())
				t.Fatal("New accepted a module whose start-up hangs")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if took > bound {
				t.Fatalf("New returned after %s, want at most %s", took, bound)
			}
			t.Logf("New failed after %s: %v", took, err)
			if !tc.validate {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start = time.Now()
			if _, problems := Validate(ctx, wasm, ""); len(problems) == 0 || time.Since(start) > bound {
				t.Fatalf("Validate found %q after %s, want a problem within %s", problems, time.Since(start), bound)
			}
		})
	}
}

// TestRecycleWithHangingInitFreesSlot: when the instance that replaces a
// recycled one hangs in init, sleeping or recursing, the pool's only slot
// is free again after the call timeout: the next calls get an instance.
func TestRecycleWithHangingInitFreesSlot(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// hang adds what init's hang needs to m and returns its code.
		hang func(m *wt.Module) []byte
	}{
		{"sleeps", func(*wt.Module) []byte { return sleep(guestSleep) }},
		{"recurses", func(m *wt.Module) []byte {
			first := uint32(len(m.Imports) + len(m.Funcs))
			m.Funcs = append(m.Funcs, binaryRecursion(false, nil)(first)...)
			return wt.Seq(wt.I32Const(60), wt.Call(first), wt.Drop)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, hanging := signalOn("init hangs")
			mod, err := New(context.Background(), stallModule(func(m *wt.Module) {
				// The init run after the test sets "hang" hangs, once.
				setBody(abi.ExportInit, wt.Seq(ifStateHas("hang", wt.Seq(
					wt.I32Const(messageAt), wt.I32Const(4), wt.Call(stallStateDelete),
					logLine("init hangs"), tc.hang(m))), okEmpty))(m)
				setBody(abi.ExportInstanceExists, wt.Seq(growMemory, okEmpty))(m)
			}), Config{Name: "recycle-hangs", PoolSize: 1, CallTimeout: timeout, RecycleAbovePages: 1, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			mod.state.Set("hang", []byte{1})
			if err := mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil); err != nil {
				t.Fatal(err)
			}
			awaitSignal(t, hanging, "the recycle's init")
			start := time.Now()
			// The call timeout of the recycle, then of a call that may have
			// waited for the slot meanwhile.
			bound := 2*timeout + abortMargin
			for {
				err := mod.Call(context.Background(), abi.ExportInstanceShutdown, &abi.Node{}, nil)
				if err == nil {
					break
				}
				if time.Since(start) > bound {
					t.Fatalf("no call succeeded within %s of the recycle's init hanging: %v", bound, err)
				}
			}
		})
	}
}

// TestCloseWhileGuestRuns: Close with a short grace period, while a call
// sleeps or spins in the guest or a recycle's init sleeps, aborts that
// code, returns once it has stopped (no instance of the module is left)
// and says so; the process survives, the call fails as closed.
func TestCloseWhileGuestRuns(t *testing.T) {
	const grace = 100 * time.Millisecond
	recycleInit := wt.Seq(ifStateHas("hang", wt.Seq(logLine("running"), sleep(guestSleep))), okEmpty)
	for _, tc := range []struct {
		name    string
		edit    func(*wt.Module)
		recycle bool // the call returns, its recycling runs on
	}{
		{"call sleeps", setBody(abi.ExportInstanceExists, wt.Seq(logLine("running"), sleep(guestSleep), okEmpty)), false},
		{"call spins", setBody(abi.ExportInstanceExists, wt.Seq(logLine("running"), wt.LoopForever, okEmpty)), false},
		{"recycle's init sleeps", func(m *wt.Module) {
			setBody(abi.ExportInit, recycleInit)(m)
			setBody(abi.ExportInstanceExists, wt.Seq(growMemory, okEmpty))(m)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, running := signalOn("running")
			mod, err := New(context.Background(), stallModule(tc.edit),
				Config{Name: "close-" + tc.name, PoolSize: 1, CallTimeout: 10 * time.Second, RecycleAbovePages: 1, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			mod.state.Set("hang", []byte{1})
			callErr := make(chan error, 1)
			go func() { callErr <- mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil) }()
			awaitSignal(t, running, "the guest")

			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			start := time.Now()
			closeErr := mod.Close(ctx)
			took := time.Since(start)
			live := liveInstancesOf(mod)
			// The call ends before the assertions, so that a host which
			// released the module under it crashes here.
			select {
			case err = <-callErr:
			case <-time.After(guestSleep + 5*time.Second):
				t.Fatal("the call never returned")
			}
			if closeErr == nil || !strings.Contains(closeErr.Error(), "were aborted") {
				t.Fatalf("Close = %v, want an error saying calls were aborted", closeErr)
			}
			if live != 0 {
				t.Fatalf("Close returned with %d instances of the module live", live)
			}
			if took > grace+abortMargin {
				t.Fatalf("Close returned after %s, want at most %s", took, grace+abortMargin)
			}
			t.Logf("Close returned after %s", took)
			if tc.recycle {
				if err != nil {
					t.Fatalf("the call before the recycle: %v", err)
				}
				return
			}
			var failure *FailureError
			if !errors.As(err, &failure) || failure.Reason != ReasonUnavailable || !errors.Is(err, ErrClosed) {
				t.Fatalf("the aborted call: %v, want unavailable and ErrClosed", err)
			}
		})
	}
}

func awaitSignal(t *testing.T, signal <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-signal:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s never got there", what)
	}
}

func liveInstancesOf(m *Module) int {
	s := liveInstances
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.m {
		if i.owner == m {
			n++
		}
	}
	return n
}

// TestCloseRacesCalls: modules replaced over and over while calls sleep,
// spin and recycle instances on them, each closed twice at once with
// little or no grace, never crash the process; every call either answers
// or fails, and nothing stays running. Run under -race.
func TestCloseRacesCalls(t *testing.T) {
	wasm := stallModule(func(m *wt.Module) {
		setBody(abi.ExportInstanceExists, wt.Seq(sleep(20*time.Millisecond), okEmpty))(m)
		setBody(abi.ExportInstanceShutdown, wt.Seq(wt.LoopForever, okEmpty))(m)
		setBody(abi.ExportInstanceMetadata, wt.Seq(growMemory, okEmpty))(m)
		setBody(abi.ExportInit, wt.Seq(sleep(time.Millisecond), okEmpty))(m)
	})
	exports := []string{abi.ExportInstanceExists, abi.ExportInstanceShutdown, abi.ExportInstanceMetadata}
	for round := 0; round < 12; round++ {
		mod, err := New(context.Background(), wasm, Config{Name: "close-race", PoolSize: 2, CallTimeout: 2 * time.Second, RecycleAbovePages: 1})
		if err != nil {
			t.Fatal(err)
		}
		var calls sync.WaitGroup
		for c := 0; c < 4; c++ {
			calls.Add(1)
			go func() {
				defer calls.Done()
				for i := c; ; i++ {
					err := mod.Call(context.Background(), exports[i%len(exports)], &abi.Node{Name: "n"}, nil)
					var failure *FailureError
					if err != nil && !errors.As(err, &failure) {
						t.Errorf("call: %v, want a *FailureError", err)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%4) * 10 * time.Millisecond) // let the calls get to different points
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(round%3)*5*time.Millisecond)
		var closes sync.WaitGroup
		for range 2 {
			closes.Add(1)
			go func() {
				defer closes.Done()
				mod.Close(ctx)
			}()
		}
		closes.Wait()
		cancel()
		if n := liveInstancesOf(mod); n != 0 {
			t.Fatalf("round %d: Close returned with %d instances live", round, n)
		}
		calls.Wait()
	}
}

// TestTokenExchangeBoundedByCall: a token endpoint that never answers
// holds a call no longer than its deadline, the call that started the
// exchange included; the exchange goes on for the calls after it, and a
// call that ran out of time is not reported as a failed credential.
func TestTokenExchangeBoundedByCall(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer tokens.Close()
	defer close(release)
	const timeout = 300 * time.Millisecond
	dir := credentialstest.SecretDir(t, map[string]string{"client-id": "ccm", "client-secret": "pw"})
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.CallTimeout = timeout
		c.Credentials.Dir = dir
		c.Credentials.Auth = []credentials.AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{
			TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}}}
		c.Credentials.OnAuthFailure = func(credential string, err error) {
			t.Errorf("credential %s reported failed when only the call ran out of time: %v", credential, err)
		}
	})
	for i := range 3 {
		start := time.Now()
		err := f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{})
		if err == nil {
			t.Fatalf("call %d: answered without a token", i)
		}
		if took := time.Since(start); took > timeout+abortMargin {
			t.Fatalf("call %d held its caller %s with a %s deadline: %v", i, took, timeout, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d token requests, want the one exchange the calls shared", n)
	}
}
