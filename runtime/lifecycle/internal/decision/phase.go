package decision

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
