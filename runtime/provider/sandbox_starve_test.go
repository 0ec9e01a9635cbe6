package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// shadowRecorder is a Backend that records what the rollout tells it
// about running in shadow; nothing calls it.
type shadowRecorder struct {
	Backend
	shadow []bool
}

func (s *shadowRecorder) SetShadow(shadow bool)       { s.shadow = append(s.shadow, shadow) }
func (s *shadowRecorder) Info() host.Info             { return host.Info{} }
func (s *shadowRecorder) Close(context.Context) error { return nil }

// TestCandidateYieldsRateBudgetUntilPromoted: a candidate runs in shadow,
// where it gets only the rate budget's spare room, from the start of its
// rollout until its promotion, which makes it a full user of the budget;
// with shadowing disabled it goes straight to service as a full user.
func TestCandidateYieldsRateBudgetUntilPromoted(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		cfg := &Config{}
		cfg.Module.Rollout.Shadow.Disabled = disabled
		inService := &shadowRecorder{}
		c := NewWithBackend(cfg, inService)
		candidate := &shadowRecorder{}
		file := modulefile.File{Digest: "candidate"}
		c.startRollout(candidate, file)
		if !disabled {
			if want := []bool{true}; !slices.Equal(candidate.shadow, want) {
				t.Fatalf("in shadow, the candidate was told %v, want %v", candidate.shadow, want)
			}
			c.promote(candidate, file, "compared")
		}
		if want := []bool{true, false}; !slices.Equal(candidate.shadow, want) {
			t.Errorf("shadow disabled %v: promoted, the candidate was told %v, want %v", disabled, candidate.shadow, want)
		}
		if len(inService.shadow) != 0 {
			t.Errorf("the module in service was told %v; it must keep its place in the budget", inService.shadow)
		}
	}
}

// TestShadowThrottledIsNotAFailure: the module in service and a benign
// candidate share a limited origin. With a burst of 1 the budget never has
// spare room, so every request of the candidate gets the host's 429 and it
// answers RetryAfter: those calls are not compared, neither failures nor
// disagreements, and the candidate is neither rejected nor promoted on no
// evidence; it waits in shadow. With room to spare, the same candidate is
// compared and promoted.
func TestShadowThrottledIsNotAFailure(t *testing.T) {
	limit := func(burst int) func(*Config) {
		return func(cfg *Config) {
			cfg.HTTP.RateLimits = []host.RateLimit{{Origin: cfg.HTTP.AllowedOrigins[0], PerSecond: 1000, Burst: burst}}
		}
	}

	e := newRolloutEnv(t, 3, fastShadow, limit(1))
	next := e.replace(t, "relabel")
	shadow := e.c.rollout.Load()
	for range 2 {
		e.existsAll(t)
	}
	e.poll(t, "the end of the shadow period", func() bool { return e.c.rollout.Load() != shadow || shadow.waitReported })
	seen := statsOf(shadow)
	if e.c.candidate() != next || e.c.served.Digest != e.digest || e.c.refused != (refusal{}) {
		t.Fatalf("candidate %q, in service %q, rejected %q after %s; want the candidate still in shadow",
			e.c.candidate(), e.c.served.Digest, e.c.refused, seen)
	}
	if seen.Compared() != 0 || seen.Throttled == 0 {
		t.Fatalf("comparison %s: want every call of the candidate left out as throttled", seen)
	}
	t.Logf("with burst 1: %s", seen)

	e = newRolloutEnv(t, 3, fastShadow, limit(1000))
	next = e.replace(t, "relabel")
	shadow = e.c.rollout.Load()
	for range 2 {
		e.existsAll(t)
	}
	e.poll(t, "promotion", func() bool { return e.c.served.Digest == next })
	if seen := statsOf(shadow); seen.Throttled != 0 || seen.ByVerdict[lifecycle.Agree] == 0 {
		t.Fatalf("comparison %s with room to spare: want agreements and nothing throttled", seen)
	}
}

// throttledBackend is a candidate whose every call the rate budget left
// without room, as host.Module reports it.
type throttledBackend struct{ shadowRecorder }

func (*throttledBackend) Call(_ context.Context, export string, _, _ abi.Message) error {
	return &host.FailureError{Export: export, Reason: host.ReasonShadowThrottled, Err: host.ErrShadowThrottled}
}

// TestThrottledProbeIsNoEvidence: the probe of the Nodes at the end of the
// shadow period counts a Node as probed only if it was compared, so a
// candidate the budget left no room to answer about any Node is not
// promoted on the strength of one call compared elsewhere: that probe is
// what keeps a module calling every Node gone out of service.
func TestThrottledProbeIsNoEvidence(t *testing.T) {
	e := newRolloutEnv(t, 3, fastShadow)
	e.c.startRollout(&throttledBackend{}, modulefile.File{Digest: "candidate"})
	r := e.c.rollout.Load()
	r.mu.Lock()
	r.stats.ByVerdict[lifecycle.Agree] = 1
	r.mu.Unlock()
	e.poll(t, "the end of the probe", func() bool { return r.waitReported || e.c.rollout.Load() != r })
	seen := statsOf(r)
	if e.c.rollout.Load() != r || e.c.served.Digest != e.digest {
		t.Fatalf("in service %q after %s: want the candidate still in shadow", e.c.served.Digest, seen)
	}
	if seen.Throttled != len(e.nodes) {
		t.Fatalf("comparison %s: want the %d probe calls left out as throttled", seen, len(e.nodes))
	}
}
