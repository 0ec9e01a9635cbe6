// Package decision holds runtime/lifecycle's decisions as pure functions
// of their inputs, so that each is tested without a module: the rollout's
// state machine (Phase, Event, Next), the comparison of a candidate's
// answers with the module in service's (Compare, Gone, Stats), the
// verdicts that move a rollout on (JudgeShadow at the end of a shadow
// period, JudgeProbation during the rollback window) and the choice of
// the first module (DecideStart). The Manager of runtime/lifecycle
// carries them out.
package decision
