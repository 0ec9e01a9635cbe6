package guest

import (
	"context"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// TestContextCarriesCallDeadline: inside a call, Context ends a tenth of
// the time left before the host said the call does, a second at most,
// leaving the answer time to reach the host, and the call's context and
// deadline end with the call.
func TestContextCarriesCallDeadline(t *testing.T) {
	for _, tc := range []struct{ left, reserve time.Duration }{
		{2 * time.Second, 200 * time.Millisecond},
		{30 * time.Second, time.Second},
	} {
		SetDeadline(tc.left)
		Dispatch(nil, nil, func() (abi.Message, error) {
			deadline, _ := Context().Deadline()
			if left := time.Until(deadline); left > tc.left-tc.reserve || left < tc.left-tc.reserve-time.Second/2 {
				t.Errorf("host's deadline in %s: context ends in %s, want %s before the host's", tc.left, left, tc.reserve)
			}
			return nil, nil
		})
	}
	SetDeadline(2 * time.Second)
	var first context.Context
	Dispatch(nil, nil, func() (abi.Message, error) {
		first = Context()
		if _, ok := first.Deadline(); !ok {
			t.Error("the call's context has no deadline")
		}
		if Context() != first {
			t.Error("a second Context in one call is a different context")
		}
		return nil, nil
	})
	if first.Err() == nil {
		t.Error("the call's context outlives the call")
	}
}

// TestNoDeadlineWithoutSetDeadline: a call the host did not announce (an
// older host) gets Background, never the deadline of the call before,
// even when that call ended early on a malformed input.
func TestNoDeadlineWithoutSetDeadline(t *testing.T) {
	SetDeadline(time.Second)
	Dispatch([]byte{0xff}, &abi.Node{}, func() (abi.Message, error) {
		t.Error("ran a method on a malformed input")
		return nil, nil
	})
	Dispatch(nil, nil, func() (abi.Message, error) {
		if ctx := Context(); ctx != context.Background() {
			deadline, _ := ctx.Deadline()
			t.Errorf("context of an unannounced call has a deadline in %s", time.Until(deadline))
		}
		return nil, nil
	})
}
