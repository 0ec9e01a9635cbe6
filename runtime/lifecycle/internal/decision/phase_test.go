package decision

import (
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// TestNext: every transition of the state machine, and every event a
// phase does not take.
func TestNext(t *testing.T) {
	cases := []struct {
		from         Phase
		event        Event
		keepPrevious bool
		want         Phase
		wantErr      bool
	}{
		{Serving, Loaded, true, Shadow, false},
		{Shadow, Promoted, true, Probation, false},
		{Shadow, Promoted, false, Serving, false},
		{Shadow, Rejected, true, Serving, false},
		{Shadow, Superseded, true, Serving, false},
		{Probation, RolledBack, true, Serving, false},
		{Probation, Released, true, Serving, false},
		{Probation, Superseded, true, Serving, false},
		{Serving, Promoted, true, Serving, true},
		{Serving, RolledBack, true, Serving, true},
		{Shadow, Loaded, true, Shadow, true},
		{Shadow, Released, true, Shadow, true},
		{Probation, Rejected, true, Probation, true},
		{Probation, Promoted, true, Probation, true},
	}
	for _, tc := range cases {
		got, err := Next(tc.from, tc.event, tc.keepPrevious)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("Next(%s, %s, keepPrevious %v) = %s, %v; want %s, error %v", tc.from, tc.event, tc.keepPrevious, got, err, tc.want, tc.wantErr)
		}
	}
}

func stats(agree, destructive, candidateFailed, inServiceFailed int) Stats {
	var s Stats
	s.ByVerdict[Agree], s.ByVerdict[Destructive] = agree, destructive
	s.ByVerdict[CandidateFailed], s.ByVerdict[InServiceFailed] = candidateFailed, inServiceFailed
	return s
}

// TestJudgeShadow: the verdicts on a candidate in shadow, with the
// default period of two minutes and twenty calls.
func TestJudgeShadow(t *testing.T) {
	cfg := cloudconfig.Shadow{}.WithDefaults()
	over := 3 * time.Minute
	cases := []struct {
		name      string
		stats     Stats
		elapsed   time.Duration
		probe     NodeProbe
		probedAll bool
		want      ShadowAction
	}{
		{"one destructive answer rejects at once", stats(100, 1, 0, 0), time.Second, NodeProbeNotStarted, false, Reject},
		{"three more failures reject", stats(10, 0, 3, 0), time.Second, NodeProbeNotStarted, false, Reject},
		{"failures of both modules cancel out", stats(20, 0, 3, 1), over, NodeProbeDone, false, Promote},
		{"a tenth more failures reject", stats(200, 0, 30, 5), over, NodeProbeDone, false, Reject},
		{"the period is not over", stats(100, 0, 0, 0), time.Minute, NodeProbeNotStarted, false, KeepShadowing},
		{"the period is over: probe the Nodes", stats(100, 0, 0, 0), over, NodeProbeNotStarted, false, StartNodeProbe},
		{"the probe runs", stats(100, 0, 0, 0), over, NodeProbeRunning, false, KeepShadowing},
		{"too few comparisons", stats(19, 0, 0, 0), over, NodeProbeDone, false, AwaitComparisons},
		{"few Nodes, every one compared", stats(5, 0, 0, 0), over, NodeProbeDone, true, Promote},
		{"every Node compared, but none at all", stats(0, 0, 0, 0), over, NodeProbeDone, true, AwaitComparisons},
		{"enough comparisons", stats(20, 0, 0, 0), over, NodeProbeDone, false, Promote},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := JudgeShadow(cfg, tc.stats, tc.elapsed, tc.probe, tc.probedAll)
			if got != tc.want || (got == Reject) != (why != "") {
				t.Fatalf("JudgeShadow = %v (%q), want %v", got, why, tc.want)
			}
		})
	}
}

// TestJudgeProbation: the verdicts on a promoted module, with a window of
// ten minutes, at least ten calls and a quarter of failures.
func TestJudgeProbation(t *testing.T) {
	cfg := cloudconfig.Rollback{Window: cloudconfig.Duration{Duration: 10 * time.Minute}, MinCalls: 10, FailurePercent: 25}.WithDefaults()
	cases := []struct {
		name            string
		calls, failures int64
		elapsed         time.Duration
		want            ProbationAction
	}{
		{"healthy, in the window", 100, 1, time.Minute, KeepOnProbation},
		{"too few calls to judge", 9, 9, time.Minute, KeepOnProbation},
		{"a quarter failed", 40, 10, time.Minute, RollBack},
		{"just under a quarter", 41, 10, time.Minute, KeepOnProbation},
		{"failing at the end of the window", 40, 10, time.Hour, RollBack},
		{"window over", 100, 1, 10 * time.Minute, Release},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeProbation(cfg, tc.calls, tc.failures, tc.elapsed); got != tc.want {
				t.Fatalf("JudgeProbation = %v, want %v", got, tc.want)
			}
		})
	}
}
