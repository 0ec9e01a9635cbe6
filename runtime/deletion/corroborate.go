package deletion

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Corroborated deletions: scale-downs at full speed.
//
// The deletion budget alone makes a routine scale-down crawl: with the
// defaults, the last of 20 Nodes removed from a 100-Node cluster would wait
// about three hours, NotReady. Yet the budget exists for one kind of
// failure, answers that are wrong for every Node at once: a module release
// that calls everything gone, a cloud API (or a misconfigured account or
// region) answering "not found" for everything. Such an answer past the
// budget is admitted when two pieces of evidence say that the module still
// tells existing instances from missing ones:
//
//  1. A control probe: the module in service, asked the same question about
//     Ready Nodes (which the controllers never ask about), answers that
//     their instances exist. A module or an API that answers "gone" for
//     everything fails it; so does one that cannot answer at all. The
//     verdict is kept for ProbeTTL, so a scale-down costs a few
//     cloud calls, not three per Node.
//  2. A second opinion, while a promoted module is on probation: the
//     previous module, still loaded for the rollback window, answers that
//     the instance is gone too. A new release that calls gone what its
//     predecessor calls present is held to the budget, whatever the probe
//     says, even with shadowing turned off.
//
// What this cannot catch is a module that is wrong only about NotReady
// Nodes (one that reads "stopped" as "terminated", say) and has been in
// service past its probation; for that the corroborated admissions have a
// ceiling of their own, Percent of the cluster's Nodes per window
// (default half), beyond which the plain budget applies again.

// ProbeNodes Ready Nodes are asked about per control probe; its verdict is
// kept for ProbeTTL.
const (
	ProbeNodes = 3
	ProbeTTL   = 30 * time.Second
)

var deletionsCorroborated = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "corroborated_total",
	Help:           "Nodes admitted for deletion beyond the budget because the control probe and, during a rollout's probation, the previous module corroborated the module's answer.",
	StabilityLevel: metrics.ALPHA,
}, []string{"module"})

func init() { legacyregistry.MustRegister(deletionsCorroborated) }

// ControlProbe caches the last verdict on the module in service; its zero
// value has none.
type ControlProbe struct {
	mu sync.Mutex
	// module is the module the verdict is about, as the caller identifies
	// it; a new module is probed afresh.
	module any
	at     time.Time
	// failed says why the last probe failed, empty when it passed.
	failed string
	// next rotates the Nodes probed, so that one odd Node does not decide
	// every verdict.
	next int
}

// Ask asks the module in service the question the lifecycle controller
// would ask about node, and reports whether the answer is "gone".
type Ask func(node *v1.Node) (gone bool, err error)

// Verdict returns why module fails the control probe, or "" when it
// passes: asked about up to ProbeNodes Ready Nodes of nodes other than
// the one in question (asked), it must answer that their instances exist.
// A verdict on the same module younger than ProbeTTL is returned as it
// is; one probe runs at a time, so concurrent answers share it.
func (p *ControlProbe) Verdict(module any, nodes []*v1.Node, asked string, ask Ask) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.module == module && time.Since(p.at) < ProbeTTL {
		return p.failed
	}
	p.failed = probe(probeTargets(nodes, asked, p.next), ask)
	p.next++
	p.module, p.at = module, time.Now()
	return p.failed
}

// probeTargets picks the Nodes a probe asks about: up to ProbeNodes Ready
// and initialized Nodes other than asked, starting at the next-th.
func probeTargets(nodes []*v1.Node, asked string, next int) []*v1.Node {
	var ready []*v1.Node
	for _, n := range nodes {
		if n.Name != asked && ReadyAndInitialized(n) {
			ready = append(ready, n)
		}
	}
	targets := make([]*v1.Node, 0, ProbeNodes)
	for i := range min(len(ready), ProbeNodes) {
		targets = append(targets, ready[(next+i)%len(ready)])
	}
	return targets
}

// probe asks about targets in turn and returns why the first answer that
// is not "present" fails the probe, "" when every one is.
func probe(targets []*v1.Node, ask Ask) string {
	if len(targets) == 0 {
		return "there is no Ready Node to check the module's answers against"
	}
	for _, n := range targets {
		gone, err := ask(n)
		if err != nil {
			return fmt.Sprintf("the module could not answer whether Ready Node %s's instance exists: %v", n.Name, err)
		}
		if gone {
			return fmt.Sprintf("the module answers that Ready Node %s's instance is gone too", n.Name)
		}
	}
	return ""
}

// ReadyAndInitialized reports a Node the controllers consider healthy
// and the cloud provider has initialized.
func ReadyAndInitialized(n *v1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}
