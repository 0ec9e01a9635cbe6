package guest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// TestOutcomeOf checks the error-to-status mapping the ABI specifies,
// through wrapping.
func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		err  error
		want abi.Outcome
	}{
		{nil, abi.Outcome{Status: abi.StatusOK}},
		{fmt.Errorf("instance i-1: %w", ErrNotFound), abi.Outcome{Status: abi.StatusNotFound, Message: "instance i-1: not found"}},
		{ErrNotImplemented, abi.Outcome{Status: abi.StatusNotImplemented, Message: "not implemented"}},
		{ErrImplementedElsewhere, abi.Outcome{Status: abi.StatusImplementedElsewhere, Message: "implemented elsewhere"}},
		{fmt.Errorf("x: %w", &RetryError{After: 2 * time.Second, Msg: "429"}), abi.Outcome{Status: abi.StatusRetryAfter, Message: "x: 429", RetryAfter: 2 * time.Second}},
		{errors.New("boom"), abi.Outcome{Status: abi.StatusError, Message: "boom"}},
	}
	for _, tc := range cases {
		if got := OutcomeOf(tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %+v, want %+v", tc.err, got, tc.want)
		}
	}
}

func TestHandle(t *testing.T) {
	in := abi.Marshal(nil, &abi.Node{Name: "n1"})
	echo := func(n *abi.Node) (abi.String, error) { return abi.String(n.Name), nil }

	var got abi.String
	if o, err := abi.DecodeResult(Handle(in, true, echo), &got); err != nil || o.Status != abi.StatusOK || got != "n1" {
		t.Fatalf("registered: %+v %v %q", o, err, got)
	}
	if o, _ := abi.DecodeResult(Handle(in, false, echo), nil); o.Status != abi.StatusError {
		t.Fatalf("unregistered export answered %+v", o)
	}
	if o, _ := abi.DecodeResult(Handle([]byte{0xff}, true, echo), nil); o.Status != abi.StatusError {
		t.Fatalf("malformed input answered %+v", o)
	}
}

// TestOutputBufferIsReused guards the per-call allocation count: the
// output buffer is reused, and what remains is the decoded request, the
// boxed payload, the call's closure and the decoder and encoder state that
// escape through the Message interface.
func TestOutputBufferIsReused(t *testing.T) {
	in := abi.Marshal(nil, &abi.Node{Name: "n1"})
	fn := func(n *abi.Node) (abi.Bool, error) { return true, nil }
	Handle(in, true, fn)
	allocs := testing.AllocsPerRun(100, func() { Handle(in, true, fn) })
	if allocs > 5 {
		t.Fatalf("%v allocations per call", allocs)
	}
}

// TestPolledDeadline: the timer-free context TinyGo modules get ends at
// its deadline when polled.
func TestPolledDeadline(t *testing.T) {
	live := newPolledDeadline(time.Now().Add(time.Hour))
	if live.Err() != nil {
		t.Fatalf("Err = %v before the deadline", live.Err())
	}
	select {
	case <-live.Done():
		t.Fatal("Done closed before the deadline")
	default:
	}
	ended := newPolledDeadline(time.Now().Add(-time.Millisecond))
	<-ended.Done()
	if ended.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v after the deadline, want DeadlineExceeded", ended.Err())
	}
}
