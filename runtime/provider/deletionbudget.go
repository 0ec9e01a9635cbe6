package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/events"
)

// The deletion budget.
//
// Three answers make k8s.io/cloud-provider's node lifecycle controller
// delete a NotReady Node: InstancesV2.InstanceExists false,
// Instances.InstanceExistsByProviderID false, and, for a Node without a
// provider ID, Instances.InstanceID failing with InstanceNotFound (through
// cloudprovider.GetInstanceProviderID). The controllers trust these
// answers completely, so a module release with a bug, or a cloud API that
// briefly answers "not found" for everything, would delete every NotReady
// Node within one monitor period. The budget admits such answers for at
// most max(count, percent of the cluster's Nodes) distinct Nodes in any
// sliding window; past it the answer becomes an error, which the
// controller logs and retries, so the Node stays until the window slides.
// Deletions that are really wanted (a scale-down) therefore complete, at
// the budget's pace.
//
// The budget cannot tell which controller asked. InstanceExists and
// InstanceExistsByProviderID are asked by the lifecycle controller only;
// InstanceID is also asked by the node controller while it initializes a
// Node without a provider ID, where a NotFound answer turned into an error
// only delays the initialization (the controller retries either way), but
// does take a unit of the budget.
//
// Distinct Nodes, not answers, are counted: the lifecycle controller asks
// about every NotReady Node at every monitor period (5 s by default), so
// one Node answered "gone" many times takes one unit, and a Node admitted
// once stays admitted for the rest of its window (the controller will
// delete it; denying the next answer would only make the deletion flap).

// Defaults of safety.maxNodeDeletions. One Node, or 1% of the cluster, per
// ten minutes: a 3-node cluster loses at most one Node per ten minutes to
// answers alone (it keeps a majority), a 5,000-node cluster at most 50,
// where a bad release would otherwise delete every NotReady Node within
// seconds. The window is
// long enough for the NodeDeletionDeferred Events and the metric to page
// someone before the next batch.
const (
	defaultDeletionCount   = 1
	defaultDeletionPercent = 1
	defaultDeletionWindow  = 10 * time.Minute
)

// SafetyConfig bounds what the module's answers can make the upstream
// controllers do.
type SafetyConfig struct {
	MaxNodeDeletions DeletionBudgetConfig `json:"maxNodeDeletions,omitempty"`
}

// DeletionBudgetConfig is safety.maxNodeDeletions: at most
// max(Count, Percent% of the Nodes) distinct Nodes may be answered "gone"
// per Window. Unset fields take the defaults (1, 1%, 10m). Count and
// Percent both 0 defer every deletion; Disabled turns the guard off and
// must be written out, because it lets a faulty module delete every
// NotReady Node at once.
type DeletionBudgetConfig struct {
	Disabled     bool                `json:"disabled,omitempty"`
	Count        *int                `json:"count,omitempty"`
	Percent      *int                `json:"percent,omitempty"`
	Window       metav1.Duration     `json:"window,omitempty"`
	Corroborated CorroborationConfig `json:"corroborated,omitempty"`
}

func (c SafetyConfig) validate() error {
	b := c.MaxNodeDeletions
	var errs []error
	if b.Count != nil && *b.Count < 0 {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.count %d is negative", *b.Count))
	}
	if b.Percent != nil && (*b.Percent < 0 || *b.Percent > 100) {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.percent %d is outside 0..100", *b.Percent))
	}
	if p := b.Corroborated.Percent; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.corroborated.percent %d is outside 0..100", *p))
	}
	if b.Window.Duration < 0 {
		errs = append(errs, errors.New("safety.maxNodeDeletions.window must not be negative"))
	}
	return errors.Join(errs...)
}

var (
	deletionsAdmitted = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "admitted_total",
		Help:           "Nodes the module answered gone whose deletion the budget admitted (each Node once per window).",
		StabilityLevel: metrics.ALPHA,
	})
	deletionsDeferred = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "deferred_total",
		Help:           "Answers that would have deleted a Node, turned into errors because the deletion budget was spent.",
		StabilityLevel: metrics.ALPHA,
	})
)

func init() { legacyregistry.MustRegister(deletionsAdmitted, deletionsDeferred) }

// deletionBudget is the sliding-window count of distinct Nodes admitted
// for deletion. It is consulted only on answers that would delete a Node,
// never on the ordinary call path.
type deletionBudget struct {
	count, percent int
	// corroboratedPercent caps the admissions, corroborated ones included
	// (corroborate.go); 0 when corroboration is off.
	corroboratedPercent int
	window              time.Duration
	// nodeCount is the cluster's Node count; 0 until known.
	nodeCount func() int
	now       func() time.Time

	mu sync.Mutex
	// admitted holds when each Node still in the window was admitted;
	// deferred when each Node refused was last reported, so that a Node
	// asked about every few seconds makes one Event per window, not one
	// per answer.
	admitted map[string]time.Time
	deferred map[string]time.Time
}

// newDeletionBudget returns the budget cfg asks for, or nil when it is
// disabled.
func newDeletionBudget(cfg DeletionBudgetConfig, nodeCount func() int) *deletionBudget {
	if cfg.Disabled {
		return nil
	}
	b := &deletionBudget{
		count: defaultDeletionCount, percent: defaultDeletionPercent, window: defaultDeletionWindow,
		nodeCount: nodeCount, now: time.Now,
		admitted: map[string]time.Time{}, deferred: map[string]time.Time{},
	}
	if cfg.Count != nil {
		b.count = *cfg.Count
	}
	if cfg.Percent != nil {
		b.percent = *cfg.Percent
	}
	if cfg.Window.Duration > 0 {
		b.window = cfg.Window.Duration
	}
	if !cfg.Corroborated.Disabled {
		b.corroboratedPercent = defaultCorroboratedPercent
		if cfg.Corroborated.Percent != nil {
			b.corroboratedPercent = *cfg.Corroborated.Percent
		}
	}
	return b
}

// limit is max(count, percent% of the Nodes), rounding the percentage
// down: at 150 Nodes, 1% allows one Node, not two.
func (b *deletionBudget) limit() int {
	limit, _ := b.bounds()
	return limit
}

// bounds returns the limit and the ceiling that corroborated admissions
// may fill the window up to (never less than the limit), from one count
// of the Nodes.
func (b *deletionBudget) bounds() (limit, ceiling int) {
	nodes := b.nodeCount()
	limit = max(b.count, nodes*b.percent/100)
	return limit, max(limit, nodes*b.corroboratedPercent/100)
}

// budgetDecision is what the budget says about one "gone" answer.
type budgetDecision struct {
	admitted bool
	// fresh is set when this answer admitted the Node, not an earlier one.
	fresh bool
	// corroborable is set on a refusal that corroborated evidence may
	// still turn into an admission: the budget is spent, its ceiling is not.
	corroborable bool
	// report is set on the first refusal of a Node in a window.
	report bool
	// used, limit and ceiling describe the window at the time of the
	// decision.
	used, limit, ceiling int
}

// admit decides whether the deletion of node may proceed on the module's
// word alone.
func (b *deletionBudget) admit(node string) budgetDecision {
	return b.decide(node, false)
}

// admitCorroborated decides again once the answer has been corroborated:
// the ceiling applies instead of the budget.
func (b *deletionBudget) admitCorroborated(node string) budgetDecision {
	return b.decide(node, true)
}

func (b *deletionBudget) decide(node string, corroborated bool) budgetDecision {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for name, at := range b.admitted {
		if now.Sub(at) >= b.window {
			delete(b.admitted, name)
		}
	}
	d := budgetDecision{used: len(b.admitted)}
	d.limit, d.ceiling = b.bounds()
	switch _, ok := b.admitted[node]; {
	case ok:
		d.admitted = true
	case d.used < d.limit || corroborated && d.used < d.ceiling:
		b.admitted[node] = now
		delete(b.deferred, node)
		d.admitted, d.fresh, d.used = true, true, d.used+1
	case !corroborated && d.used < d.ceiling:
		d.corroborable = true
	default:
		d.report = b.reportLocked(node, now)
	}
	return d
}

// refuse records the refusal of an answer that found no corroboration.
func (b *deletionBudget) refuse(node string) budgetDecision {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := budgetDecision{used: len(b.admitted), report: b.reportLocked(node, b.now())}
	d.limit, d.ceiling = b.bounds()
	return d
}

// reportLocked says whether a refusal of node is the first in its window,
// which is reported; later ones are not.
func (b *deletionBudget) reportLocked(node string, now time.Time) bool {
	last, seen := b.deferred[node]
	report := !seen || now.Sub(last) >= b.window
	if report {
		b.deferred[node] = now
	}
	return report
}

// nodeRef names the Node an answer is about. node is nil, and uid empty,
// when the answer came by name or provider ID and the Node cache did not
// know it.
type nodeRef struct {
	name string
	uid  types.UID
	node *v1.Node
}

func refOf(n *v1.Node) nodeRef { return nodeRef{name: n.Name, uid: n.UID, node: n} }

// errDeletionDeferred is returned instead of an answer that would delete a
// Node past the budget.
var errDeletionDeferred = errors.New("node deletion deferred by wasmccm's deletion budget")

// admitDeletion passes a "gone" answer about node through the budget: nil
// lets it through, an error replaces it. Past the budget, an answer the
// control probe and the previous module corroborate (corroborate.go) is
// admitted up to the ceiling.
func (c *Cloud) admitDeletion(ctx context.Context, node nodeRef) error {
	if c.budget == nil {
		return nil
	}
	d := c.budget.admit(node.name)
	// why the answer is not corroborated, when it is not.
	why := "corroboration is disabled or its ceiling reached"
	if d.corroborable {
		if why = c.corroborate(ctx, node); why == "" {
			// Another answer may have reached the ceiling meanwhile.
			if d = c.budget.admitCorroborated(node.name); !d.admitted {
				why = "the corroboration ceiling of " + strconv.Itoa(d.ceiling) + " Nodes is reached"
			}
		} else {
			d = c.budget.refuse(node.name)
		}
	}
	if d.admitted {
		switch {
		case d.fresh && why == "":
			deletionsCorroborated.Inc()
			klog.InfoS("node deletion admitted beyond the deletion budget: Ready Nodes answered present, and the previous module, if any, agreed",
				"node", node.name, "admitted", d.used, "limit", d.limit, "ceiling", d.ceiling, "window", c.budget.window)
		case d.fresh:
			deletionsAdmitted.Inc()
			klog.InfoS("node deletion admitted by the deletion budget", "node", node.name, "admitted", d.used, "limit", d.limit, "window", c.budget.window)
		}
		return nil
	}
	deletionsDeferred.Inc()
	err := fmt.Errorf("%w: %d of %d Nodes already admitted in the last %s, and the answer is not corroborated (%s); %s stays until the window slides",
		errDeletionDeferred, d.used, d.limit, c.budget.window, why, node.name)
	if d.report {
		klog.InfoS("node deletion deferred: the module answered that the Node's instance is gone, but the deletion budget is spent and nothing corroborates the answer",
			"node", node.name, "admitted", d.used, "limit", d.limit, "window", c.budget.window, "uncorroborated", why)
		msg := fmt.Sprintf("The provider module answered that Node %s's instance is gone; its deletion is deferred because %d of %d Nodes were already admitted for deletion in the last %s (safety.maxNodeDeletions) and %s. It proceeds when the window slides if the module still says so.",
			node.name, d.used, d.limit, c.budget.window, why)
		c.events.emitNode(node, events.NodeDeletionDeferred, msg)
		c.events.emit(events.NodeDeletionDeferred, msg)
	}
	return err
}

// nodeCache is the Node informer the controllers share. Until it has
// synced the Node count reads as 0, so only the budget's absolute count
// applies: never more than configured, and the percentage starts to count
// once the cache is complete.
type nodeCache struct {
	lister corelisters.NodeLister
	synced cache.InformerSynced
}

// SetInformers implements cloudprovider.InformerUser: the budget's
// percentage needs the Node count, and answers by provider ID need the
// Node's name.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	informer := factory.Core().V1().Nodes()
	c.nodes.Store(&nodeCache{lister: informer.Lister(), synced: informer.Informer().HasSynced})
}

// listNodes returns the cached Nodes, or nil before the cache synced.
func (c *Cloud) listNodes() []*v1.Node {
	nc := c.nodes.Load()
	if nc == nil || !nc.synced() {
		return nil
	}
	nodes, err := nc.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	return nodes
}

func (c *Cloud) nodeCount() int { return len(c.listNodes()) }

// nodeByName and nodeByProviderID name the Node an answer is about, with
// its UID when the cache has it, for Events.
func (c *Cloud) nodeByName(name string) nodeRef {
	if nc := c.nodes.Load(); nc != nil {
		if n, err := nc.lister.Get(name); err == nil {
			return refOf(n)
		}
	}
	return nodeRef{name: name}
}

func (c *Cloud) nodeByProviderID(providerID string) nodeRef {
	for _, n := range c.listNodes() {
		if n.Spec.ProviderID == providerID {
			return refOf(n)
		}
	}
	return nodeRef{name: providerID}
}
