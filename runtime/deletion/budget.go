// Package deletion holds wasmccm's Node deletion policy: the decisions on
// the module's answers that would make the upstream controllers delete a
// Node. It holds the deletion budget (Budget: a sliding window of the
// distinct Nodes admitted for deletion, its configuration, the verdict on
// one answer and the error that replaces a deferred one), corroboration
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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/internal/reportgate"
)

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

// BudgetConfig is safety.maxNodeDeletions: at most max(Count, Percent%
// of the Nodes) distinct Nodes may be answered "gone" per Window. Unset
// fields take the defaults (1, 1%, 10m). Count and Percent both 0 defer
// every deletion; Disabled turns the guard off and must be written out,
// because it lets a faulty module delete every NotReady Node at once.
type BudgetConfig struct {
	// Disabled turns the guard off (unsafe).
	Disabled bool `json:"disabled,omitempty"`
	// Count is the least number of Nodes admitted per window.
	Count *int `json:"count,omitempty"`
	// Percent of the cluster's Nodes admitted per window, when more than
	// Count.
	Percent *int `json:"percent,omitempty"`
	// Window is the sliding window the admissions are counted in.
	Window metav1.Duration `json:"window,omitempty"`
	// Corroborated admits more, up to its Percent, when other evidence
	// agrees with the module.
	Corroborated CorroborationConfig `json:"corroborated,omitempty"`
}

// DefaultBudgetConfig is safety.maxNodeDeletions with every default
// written out, for the cloud-config reference.
func DefaultBudgetConfig() BudgetConfig {
	count, percent, corroborated := defaultDeletionCount, defaultDeletionPercent, defaultCorroboratedPercent
	return BudgetConfig{Count: &count, Percent: &percent, Window: metav1.Duration{Duration: defaultDeletionWindow},
		Corroborated: CorroborationConfig{Percent: &corroborated}}
}

// Validate reports every value out of range, named by its cloud-config
// path.
func (b BudgetConfig) Validate() error {
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

// Budget is the sliding-window count of distinct Nodes admitted for
// deletion. It is consulted only on answers that would delete a Node,
// never on the ordinary call path.
type Budget struct {
	// module labels the budget's metrics.
	module         string
	count, percent int
	// corroboratedPercent caps the admissions, corroborated ones included
	// (corroborate.go); 0 when corroboration is off.
	corroboratedPercent int
	window              time.Duration

	mu sync.Mutex
	// admitted holds when each Node still in the window was admitted.
	admitted map[string]time.Time
	// deferred spaces the reports of each Node refused, so that a Node
	// asked about every few seconds makes one Event per window, not one
	// per answer.
	deferred *reportgate.Gate
}

// NewBudget returns the budget cfg asks for, or nil when it is disabled.
func NewBudget(module string, cfg BudgetConfig) *Budget {
	if cfg.Disabled {
		return nil
	}
	b := &Budget{
		module: module,
		count:  defaultDeletionCount, percent: defaultDeletionPercent, window: defaultDeletionWindow,
		admitted: map[string]time.Time{},
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
	b.deferred = reportgate.New(b.window)
	return b
}

// Limit is max(count, percent% of nodes), rounding the percentage down:
// at 150 Nodes, 1% allows one Node, not two. nodes is 0 until the Node
// cache has synced, so that only the absolute count applies until the
// percentage can be computed on the whole cluster.
func (b *Budget) Limit(nodes int) int {
	limit, _ := b.bounds(nodes)
	return limit
}

// bounds returns the limit and the ceiling that corroborated admissions
// may fill the window up to (never less than the limit).
func (b *Budget) bounds(nodes int) (limit, ceiling int) {
	limit = max(b.count, nodes*b.percent/100)
	return limit, max(limit, nodes*b.corroboratedPercent/100)
}

// Decision is what the budget says about one "gone" answer.
type Decision struct {
	Admitted bool
	// Fresh is set when this answer admitted the Node, not an earlier one.
	Fresh bool
	// Corroborable is set on a refusal that corroborated evidence may
	// still turn into an admission: the budget is spent, its ceiling is not.
	Corroborable bool
	// Report is set on the first refusal of a Node in a window.
	Report bool
	// Used, Limit and Ceiling describe the window at the time of the
	// decision.
	Used, Limit, Ceiling int
}

// Admit decides whether the deletion of node, in a cluster of nodes
// Nodes, may proceed at now on the module's word alone.
func (b *Budget) Admit(node string, nodes int, now time.Time) Decision {
	return b.decide(node, nodes, now, false)
}

// AdmitCorroborated decides again once the answer has been corroborated:
// the ceiling applies instead of the budget.
func (b *Budget) AdmitCorroborated(node string, nodes int, now time.Time) Decision {
	return b.decide(node, nodes, now, true)
}

func (b *Budget) decide(node string, nodes int, now time.Time, corroborated bool) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, at := range b.admitted {
		if now.Sub(at) >= b.window {
			delete(b.admitted, name)
		}
	}
	d := Decision{Used: len(b.admitted)}
	d.Limit, d.Ceiling = b.bounds(nodes)
	switch _, ok := b.admitted[node]; {
	case ok:
		d.Admitted = true
	case d.Used < d.Limit || corroborated && d.Used < d.Ceiling:
		b.admitted[node] = now
		b.deferred.Forget(node)
		d.Admitted, d.Fresh, d.Used = true, true, d.Used+1
	case !corroborated && d.Used < d.Ceiling:
		d.Corroborable = true
	default:
		d.Report = b.reportLocked(node, now)
	}
	return d
}

// Refuse records the refusal of an answer that found no corroboration.
func (b *Budget) Refuse(node string, nodes int, now time.Time) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := Decision{Used: len(b.admitted), Report: b.reportLocked(node, now)}
	d.Limit, d.Ceiling = b.bounds(nodes)
	return d
}

// reportLocked says whether a refusal of node is the first in its window,
// which is reported; later ones are not.
func (b *Budget) reportLocked(node string, now time.Time) bool {
	return b.deferred.Admit(node, now)
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
				"node", node, "admitted", d.Used, "limit", d.Limit, "ceiling", d.Ceiling, "window", b.window)
		case d.Fresh:
			deletionsAdmitted.WithLabelValues(b.module).Inc()
			klog.InfoS("node deletion admitted by the deletion budget", "node", node, "admitted", d.Used, "limit", d.Limit, "window", b.window)
		}
		return "", nil
	}
	deletionsDeferred.WithLabelValues(b.module).Inc()
	err = fmt.Errorf("%w: %d of %d Nodes already admitted in the last %s, and the answer is not corroborated (%s); %s stays until the window slides",
		ErrDeferred, d.Used, d.Limit, b.window, why, node)
	if d.Report {
		klog.InfoS("node deletion deferred: the module answered that the Node's instance is gone, but the deletion budget is spent and nothing corroborates the answer",
			"node", node, "admitted", d.Used, "limit", d.Limit, "window", b.window, "uncorroborated", why)
		event = fmt.Sprintf("The provider module answered that Node %s's instance is gone; its deletion is deferred because %d of %d Nodes were already admitted for deletion in the last %s (safety.maxNodeDeletions) and %s. It proceeds when the window slides if the module still says so.",
			node, d.Used, d.Limit, b.window, why)
	}
	return event, err
}
