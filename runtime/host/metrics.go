package host

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/sharedstate"
)

// Metrics go to component-base's legacy registry, which the CCM serves on
// /metrics of its secure port alongside the upstream controllers' metrics.
var (
	callsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "calls_total",
		Help:           "Export calls by module, export and outcome (ok, a guest status, trap, timeout, abi_violation, unavailable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "export", "outcome"})
	callDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "call_duration_seconds",
		Help:           "Latency of export calls, host functions included.",
		Buckets:        metrics.ExponentialBuckets(0.00001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "export"})
	instancesReplaced = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "instances_replaced_total",
		Help:           "Instances closed because a call trapped, timed out or broke the ABI.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "reason"})
	instancesRecycled = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "instances_recycled_total",
		Help:           "Healthy instances closed and replaced after a call because their linear memory passed the high-water mark.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	instancesIdleClosed = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "instances_idle_closed_total",
		Help:           "Healthy instances closed because no call used them for a minute; the pool makes new ones as calls need them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	instancesStuck = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "instances_stuck",
		Help:           "Instances whose guest code ran on past its deadline and the host's abort margin: the host gave their pool slots back, and their memory stays mapped until the code returns.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	poolInstances = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "pool_instances",
		Help:           "Instances by state (busy, idle).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "state"})
	credentialReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "credential_reads_total",
		Help:           "Credential lookups by name and result (ok, not_granted, not_found).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "name", "result"})
	logDropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "log_lines_dropped_total",
		Help:           "Guest log lines dropped by the rate limit.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(callsTotal, callDuration, instancesReplaced, instancesRecycled, instancesIdleClosed, instancesStuck, poolInstances,
			credentialReads, logDropped)
		egress.RegisterMetrics()
		sharedstate.RegisterMetrics()
	})
}
