package guest

import (
	"context"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// TestContextCarriesCallDeadline: inside a call, Context ends when the host
// said the call does, and the call's context and deadline end with it.
func TestContextCarriesCallDeadline(t *testing.T) {
	SetDeadline(2 * time.Second)
	var first context.Context
	Dispatch(nil, nil, func() (abi.Message, error) {
		first = Context()
		deadline, ok := first.Deadline()
		if left := time.Until(deadline); !ok || left > 2*time.Second || left < time.Second {
			t.Errorf("deadline in %s (set %v), want about 2s", left, ok)
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
