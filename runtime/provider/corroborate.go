package provider

import (
	"context"
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
//     verdict is kept for controlProbeTTL, so a scale-down costs a few
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

// Defaults of safety.maxNodeDeletions.corroborated.
const (
	defaultCorroboratedPercent = 50
	// controlProbeNodes Ready Nodes are asked about per probe.
	controlProbeNodes = 3
	controlProbeTTL   = 30 * time.Second
)

// CorroborationConfig is safety.maxNodeDeletions.corroborated: "gone"
// answers past the budget that the control probe and, during probation,
// the previous module corroborate are admitted up to Percent (default 50)
// of the Nodes per window. Disabled holds every answer to the budget.
type CorroborationConfig struct {
	Disabled bool `json:"disabled,omitempty"`
	Percent  *int `json:"percent,omitempty"`
}

var deletionsCorroborated = metrics.NewCounter(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "corroborated_total",
	Help:           "Nodes admitted for deletion beyond the budget because the control probe and, during a rollout's probation, the previous module corroborated the module's answer.",
	StabilityLevel: metrics.ALPHA,
})

func init() { legacyregistry.MustRegister(deletionsCorroborated) }

// controlProbe caches the last verdict on the module in service.
type controlProbe struct {
	mu sync.Mutex
	// backend is the module the verdict is about (as the Cloud holds it,
	// so that comparing never depends on the Backend's type); a new module
	// is probed afresh.
	backend *Backend
	at      time.Time
	// failed says why the last probe failed, empty when it passed.
	failed string
	// next rotates the Nodes probed, so that one odd Node does not decide
	// every verdict.
	next int
}

// corroborate looks for evidence that a "gone" answer about node is not
// one of the answers the budget guards against, and returns why it found
// none, or "" when the answer is corroborated.
func (c *Cloud) corroborate(ctx context.Context, node nodeRef) string {
	if node.node == nil {
		return "the Node is not in the Node cache"
	}
	if r := c.rollout.Load(); r != nil && r.phase == phaseProbation {
		export, in, out := c.existenceQuestion(node.node)
		err := r.other.Call(ctx, export, in, out)
		if !gone(export, answer{out, err}) {
			return fmt.Sprintf("the previous module %s, kept for the rollback window, does not answer that the instance is gone", r.otherFile.Digest)
		}
	}
	return c.probeControl(ctx, node.name)
}

// probeControl asks the module in service about up to controlProbeNodes
// Ready Nodes, other than the one in question, unless a verdict on the
// same module is fresh.
func (c *Cloud) probeControl(ctx context.Context, asked string) string {
	p := &c.control
	p.mu.Lock()
	defer p.mu.Unlock()
	backend := c.backend.Load()
	if p.backend == backend && time.Since(p.at) < controlProbeTTL {
		return p.failed
	}
	var ready []*v1.Node
	for _, n := range c.listNodes() {
		if n.Name != asked && isReadyAndInitialized(n) {
			ready = append(ready, n)
		}
	}
	p.failed = ""
	if len(ready) == 0 {
		p.failed = "there is no Ready Node to check the module's answers against"
	}
	for i := range min(len(ready), controlProbeNodes) {
		n := ready[(p.next+i)%len(ready)]
		export, in, out := c.existenceQuestion(n)
		err := (*backend).Call(ctx, export, in, out)
		if err != nil {
			p.failed = fmt.Sprintf("the module could not answer whether Ready Node %s's instance exists: %v", n.Name, err)
			break
		}
		if gone(export, answer{out, nil}) {
			p.failed = fmt.Sprintf("the module answers that Ready Node %s's instance is gone too", n.Name)
			break
		}
	}
	p.next++
	p.backend, p.at = backend, time.Now()
	return p.failed
}

// isReadyAndInitialized reports a Node the controllers consider healthy
// and the cloud provider has initialized.
func isReadyAndInitialized(n *v1.Node) bool {
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
