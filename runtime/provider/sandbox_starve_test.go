package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/wasmccm/wasmccm/runtime/host"
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
