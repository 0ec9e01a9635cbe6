package assembly

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/runtime/host"
)

func TestStallGuard(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	g := &stallGuard{module: "m", now: func() time.Time { return now }}
	stall := &host.FailureError{Export: "e", Reason: host.ReasonTimeout, Err: context.DeadlineExceeded}
	busy := &host.FailureError{Export: "e", Reason: host.ReasonUnavailable}
	trap := &host.FailureError{Export: "e", Reason: host.ReasonTrap}
	answer := errors.New("answered") // recorded as a call without error
	steps := []struct {
		name   string
		after  time.Duration
		record error // nil: no call
		open   bool  // admit refuses, after recording
	}{
		{"a stall", 0, stall, false},
		{"a busy pool", 0, busy, false},
		{"an error that does not hold the caller resets the count", 0, trap, false},
		{"stall 1", 0, stall, false},
		{"stall 2", 0, errors.Join(errors.New("module"), stall), false},
		{"stall 3 pauses the module", 0, stall, true},
		{"still paused", stallPause - time.Second, nil, true},
		{"tried again after the pause", time.Second, nil, false},
		{"one more stall pauses it again", 0, stall, true},
		{"after the pause, an answer resets it", stallPause, answer, false},
		{"then one stall is not enough", 0, stall, false},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		switch s.record {
		case nil:
		case answer:
			g.record(nil)
		default:
			g.record(s.record)
		}
		if err := g.admit(); (err != nil) != s.open {
			t.Fatalf("%s: admit() = %v, want paused %v", s.name, err, s.open)
		}
	}
}

// TestStalledModuleFailsFast is what the upstream Node controllers see:
// they call about one Node after another. After a module's Node calls ran
// to their timeout three times, its Node calls fail at once, and the other
// module's Nodes are answered as before.
func TestStalledModuleFailsFast(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	instances, _ := h.c.InstancesV2()
	ctx := context.Background()
	for i := range stallsToOpen {
		start := time.Now()
		if _, err := instances.InstanceExists(ctx, h.nodes["loop"]); !stalled(err) {
			t.Fatalf("call %d: %v, want a timeout", i, err)
		}
		if took := time.Since(start); took < 500*time.Millisecond {
			t.Fatalf("call %d returned after %v, before the module's 1s timeout", i, took)
		}
	}
	start := time.Now()
	_, err := instances.InstanceExists(ctx, h.nodes["test-a"])
	// "At once" is well short of the 1s the call would otherwise wait:
	// half of it, which a loaded machine cannot reach by scheduling alone.
	if took := time.Since(start); err == nil || took > 500*time.Millisecond {
		t.Fatalf("the stalled module's next Node call: %v after %v; want an error at once, not after the module's 1s timeout", err, took)
	}
	if meta, err := instances.InstanceMetadata(ctx, h.nodes["sim-a"]); err != nil || meta.ProviderID == "" {
		t.Fatalf("the other module: %+v, %v", meta, err)
	}
}
