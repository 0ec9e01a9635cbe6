// Package lifecycle is a module's lifecycle in wasmccm: which module
// answers each call, and how a changed module file is taken into service.
// Its decisions are pure functions of their inputs: the rollout's
// configuration (module.rollout), its state machine (Phase, Event, Next),
// the comparison of a candidate's answers with the module in service's
// (Compare, Gone, Stats), the verdicts that move a rollout on
// (JudgeShadow at the end of a shadow period, JudgeProbation during the
// rollback window) and the choice of the first module (DecideStart). A
// Manager carries them out: it starts the first module (Start), answers
// calls with the module in service (Call), polls the module file
// (Reload), shadows, promotes, rejects and rolls back, records the
// last-known-good module, and reports each step in metrics, logs and
// Events. What it needs of the cloud-config and the cluster (loading a
// module with its grants, reporting an Event, listing the Nodes) the
// adapter, runtime/provider, passes in (Options).
//
// A new module that validates and compiles is not put in service at once.
// It first runs in shadow: the module in service stays authoritative, and
// each read-only call it answers is asked again of the candidate, after
// the caller has its answer, and the two answers are compared. One
// destructive disagreement, or clearly more failures than the module in
// service, rejects the candidate; otherwise, once the shadow period is
// over, it is promoted. The module it replaced then stays compiled for the
// rollback window, and if the promoted module fails (traps, timeouts, ABI
// violations) too often, the host switches back. A rejected or rolled-back
// file is refused, by sha256, until the file changes again.
//
// At start-up the last-known-good record plays the previous module;
// without one (a first install) there is nothing to compare with or
// return to, and the deletion budget (runtime/deletion) is what protects
// the Nodes from a bad module.
package lifecycle

import "fmt"

// Phase is where a module change stands.
type Phase int

const (
	// Serving: one module answers; no change is in progress.
	Serving Phase = iota
	// Shadow: the candidate is compared, the old module answers.
	Shadow
	// Probation: the new module answers, the old one waits for the
	// rollback window.
	Probation
)

func (p Phase) String() string {
	return [...]string{"serving", "shadow", "probation"}[p]
}

// Event is what happens to a module change.
type Event int

const (
	// Loaded: a new module file was read, checked, compiled and
	// initialised, and can stand in for the module in service.
	Loaded Event = iota
	// Rejected: the shadow comparison found the candidate wanting.
	Rejected
	// Promoted: the candidate, or a new module when shadowing is
	// disabled, is put in service.
	Promoted
	// RolledBack: the promoted module failed too often; the previous one
	// is put back.
	RolledBack
	// Released: the rollback window is over; the previous module is
	// dropped.
	Released
	// Superseded: a newer module file arrived; a candidate is dropped, a
	// promoted module keeps its place.
	Superseded
)

func (e Event) String() string {
	return [...]string{"loaded", "rejected", "promoted", "rolled_back", "released", "superseded"}[e]
}

// Next is the phase event e leads to from phase p. keepPrevious says
// whether a promotion keeps the previous module for the rollback window
// (module.rollout.rollback not disabled). An event the phase does not
// take is an error.
func Next(p Phase, e Event, keepPrevious bool) (Phase, error) {
	switch {
	case p == Serving && e == Loaded:
		return Shadow, nil
	case p == Shadow && e == Promoted && keepPrevious:
		return Probation, nil
	case p == Shadow && (e == Promoted || e == Rejected || e == Superseded),
		p == Probation && (e == RolledBack || e == Released || e == Superseded):
		return Serving, nil
	}
	return p, fmt.Errorf("module lifecycle: %s does not happen in %s", e, p)
}

// NodeProbe is the progress of the probe of the Nodes that ends every
// shadow period (JudgeShadow).
type NodeProbe int32

const (
	NodeProbeNotStarted NodeProbe = iota
	NodeProbeRunning
	NodeProbeDone
)
