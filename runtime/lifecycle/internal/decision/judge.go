package decision

import (
	"time"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// ShadowAction is what JudgeShadow says to do with a candidate in shadow.
type ShadowAction int

const (
	// KeepShadowing: the period is not over, or the probe of the Nodes
	// runs.
	KeepShadowing ShadowAction = iota
	// StartNodeProbe: the period is over; ask both modules about the
	// Nodes before deciding, since controllers ask about NotReady Nodes
	// only.
	StartNodeProbe
	// AwaitComparisons: the period and the probe are over, but too few
	// calls were compared to promote.
	AwaitComparisons
	// Reject: the candidate is rejected (event Rejected).
	Reject
	// Promote: the candidate is put in service (event Promoted).
	Promote
)

// JudgeShadow decides on a candidate that has been in shadow for elapsed,
// with the comparisons in stats (read after probe, so that a finished
// probe's comparisons are in them) and probedAll set when the probe
// compared every Node. cfg has its defaults applied. why says what a
// rejection is about.
func JudgeShadow(cfg cloudconfig.Shadow, stats Stats, elapsed time.Duration, probe NodeProbe, probedAll bool) (action ShadowAction, why string) {
	compared := stats.Compared()
	excess := stats.ByVerdict[CandidateFailed] - stats.ByVerdict[InServiceFailed]
	switch {
	case stats.ByVerdict[Destructive] > 0:
		return Reject, "it answered that resources are gone which the module in service reports present"
	case excess >= max(3, compared/10):
		return Reject, "it failed clearly more often than the module in service"
	case elapsed < cfg.Duration.Duration:
		return KeepShadowing, ""
	case probe == NodeProbeNotStarted:
		return StartNodeProbe, ""
	case probe == NodeProbeRunning:
		return KeepShadowing, ""
	// Enough comparisons, or fewer Nodes than calls and every one compared.
	case compared < cfg.Calls && !(probedAll && compared > 0):
		return AwaitComparisons, ""
	}
	return Promote, ""
}

// ProbationAction is what JudgeProbation says to do with a promoted
// module.
type ProbationAction int

const (
	// KeepOnProbation: the rollback window is not over.
	KeepOnProbation ProbationAction = iota
	// RollBack: the promoted module failed too often (event RolledBack).
	RollBack
	// Release: the window is over; the previous module goes (event
	// Released).
	Release
)

// JudgeProbation decides on a module promoted elapsed ago, of whose calls
// failures failed without an answer. cfg has its defaults applied.
func JudgeProbation(cfg cloudconfig.Rollback, calls, failures int64, elapsed time.Duration) ProbationAction {
	switch {
	case calls >= int64(cfg.MinCalls) && failures*100 >= calls*int64(cfg.FailurePercent):
		return RollBack
	case elapsed >= cfg.Window.Duration:
		return Release
	}
	return KeepOnProbation
}
