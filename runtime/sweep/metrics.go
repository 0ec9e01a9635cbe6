package sweep

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the sweep, by module (the cloud-config's name for it, or the
// module file's). Their other labels take fixed values only: nothing a
// module answers becomes a label.
var (
	sweeps = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "orphan_sweep", Name: "runs_total",
		Help:           "Orphan load balancer sweeps by result: ok, not_synced, unsupported (the module does not list), list_failed, name_failed (a Service's load balancer name could not be had; nothing deleted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "result"})
	deletions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "orphan_sweep", Name: "deletions_total",
		Help:           "Orphaned load balancers confirmed by two sweeps, by outcome: deleted, failed, deferred (over maxDeletionsPerHour), dry_run, spared (a Service now resolves to it), not_removed (still listed after a successful delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "result"})
	ignored = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "orphan_sweep", Name: "ignored_total",
		Help:           "Listed load balancers the sweep ignored, by reason: incomplete (no name or Service UID), other_cluster (the entry names another cluster).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "reason"})
	lbGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "orphan_sweep", Name: "load_balancers",
		Help:           "Load balancers the module listed for this cluster at the last sweep.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	pendingGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "orphan_sweep", Name: "orphans_pending",
		Help:           "Load balancers found orphaned by the last sweep and not yet confirmed by the next.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
)

func init() {
	legacyregistry.MustRegister(sweeps, deletions, ignored, lbGauge, pendingGauge)
}
