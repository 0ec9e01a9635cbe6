// Package deletion holds wasmccm's Node deletion policy: the decisions on
// the module's answers that would make the upstream controllers delete a
// Node. It holds the deletion budget (Budget: its limits, read from
// cloudconfig.DeletionBudget, the reports of its decisions and the error
// that replaces a deferred answer; the sliding window of the distinct
// Nodes admitted for deletion is runtime/deletion/window), corroboration
// (corroborate.go: admissions past the budget on evidence, up to a
// ceiling) and the control probe (ControlProbe: the cached verdict on
// whether the module in service still tells existing instances from
// missing ones). It makes no module calls of its own: the provider
// supplies the questions' answers and reports what it is told to.
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
package deletion

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/deletion/window"
)

var (
	deletionsAdmitted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "admitted_total",
		Help:           "Nodes the module answered gone whose deletion the budget admitted (each Node once per window).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	deletionsDeferred = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "node_deletion_budget", Name: "deferred_total",
		Help:           "Answers that would have deleted a Node, turned into errors because the deletion budget was spent.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
)

func init() { legacyregistry.MustRegister(deletionsAdmitted, deletionsDeferred) }

// Budget is the deletion budget of one module: its window's arithmetic
// (runtime/deletion/window) and the reports of its decisions. It is
// consulted only on answers that would delete a Node, never on the
// ordinary call path.
type Budget struct {
	// module labels the budget's metrics.
	module string
	*window.Window
}

// NewBudget returns the budget cfg asks for, or nil when it is disabled.
func NewBudget(module string, cfg cloudconfig.DeletionBudget) *Budget {
	if cfg.Disabled {
		return nil
	}
	cfg = cfg.WithDefaults()
	limits := window.Limits{Count: *cfg.Count, Percent: *cfg.Percent, Length: cfg.Window.Duration}
	if !cfg.Corroborated.Disabled {
		limits.CeilingPercent = *cfg.Corroborated.Percent
	}
	return &Budget{module: module, Window: window.New(limits)}
}

// ErrDeferred is returned instead of an answer that would delete a Node
// past the budget.
var ErrDeferred = errors.New("node deletion deferred by wasmccm's deletion budget")

// Guard passes a "gone" answer about node through the budget. The error,
// wrapping ErrDeferred, replaces an answer the budget defers; nil lets it
// through. Past the budget, an answer corroborate vouches for (it returns
// why it found no evidence, "" when it found some) is admitted up to the
// ceiling. event is the message to record about a deferral, once per Node
// and window, empty otherwise. nodeCount is the cluster's Node count, 0
// until known.
func (b *Budget) Guard(node string, nodeCount func() int, corroborate func() string) (event string, err error) {
	d := b.Admit(node, nodeCount(), time.Now())
	// why the answer is not corroborated, when it is not.
	why := "corroboration is disabled or its ceiling reached"
	if d.Corroborable {
		if why = corroborate(); why == "" {
			// Another answer may have reached the ceiling meanwhile.
			if d = b.AdmitCorroborated(node, nodeCount(), time.Now()); !d.Admitted {
				why = "the corroboration ceiling of " + strconv.Itoa(d.Ceiling) + " Nodes is reached"
			}
		} else {
			d = b.Refuse(node, nodeCount(), time.Now())
		}
	}
	if d.Admitted {
		switch {
		case d.Fresh && why == "":
			deletionsCorroborated.WithLabelValues(b.module).Inc()
			klog.InfoS("node deletion admitted beyond the deletion budget: Ready Nodes answered present, and the previous module, if any, agreed",
				"node", node, "admitted", d.Used, "limit", d.Limit, "ceiling", d.Ceiling, "window", b.Length())
		case d.Fresh:
			deletionsAdmitted.WithLabelValues(b.module).Inc()
			klog.InfoS("node deletion admitted by the deletion budget", "node", node, "admitted", d.Used, "limit", d.Limit, "window", b.Length())
		}
		return "", nil
	}
	deletionsDeferred.WithLabelValues(b.module).Inc()
	err = fmt.Errorf("%w: %d of %d Nodes already admitted in the last %s, and the answer is not corroborated (%s); %s stays until the window slides",
		ErrDeferred, d.Used, d.Limit, b.Length(), why, node)
	if d.Report {
		klog.InfoS("node deletion deferred: the module answered that the Node's instance is gone, but the deletion budget is spent and nothing corroborates the answer",
			"node", node, "admitted", d.Used, "limit", d.Limit, "window", b.Length(), "uncorroborated", why)
		event = fmt.Sprintf("The provider module answered that Node %s's instance is gone; its deletion is deferred because %d of %d Nodes were already admitted for deletion in the last %s (safety.maxNodeDeletions) and %s. It proceeds when the window slides if the module still says so.",
			node, d.Used, d.Limit, b.Length(), why)
	}
	return event, err
}
