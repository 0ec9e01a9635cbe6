package host

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

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
	poolInstances = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "pool_instances",
		Help:           "Instances by state (busy, idle).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "state"})
	httpRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_requests_total",
		Help:           "Requests made through the http_do host function, by destination (the allowed origin reached, scheme://host:port; denied or invalid when none) and status code or refusal reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "host", "code"})
	credentialReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "credential_reads_total",
		Help:           "Credential lookups by name and result (ok, not_granted, not_found).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "name", "result"})
	httpCoalesced = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_coalesced_total",
		Help:           "GET requests answered by joining an identical request already in flight for another instance, by destination (the allowed origin).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "host"})
	logDropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "log_lines_dropped_total",
		Help:           "Guest log lines dropped by the rate limit.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	// The rate budget is the process's, shared by its modules: its series
	// carry the configured origin (scheme://host:port), no module.
	httpRateWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_rate_wait_seconds",
		Help:           "Time requests to an origin of http.rateLimits waited for its rate budget before being sent.",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 9),
		StabilityLevel: metrics.ALPHA,
	}, []string{"origin"})
	httpThrottled = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "host", Name: "http_throttled_total",
		Help:           "Requests to an origin of http.rateLimits throttled: by host, answered 429 by the host because the budget had no room before the call's deadline; by cloud, answered 429 by the cloud; by shadow, requests of a module in shadow answered 429 by the host for want of spare room.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"origin", "by"})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(callsTotal, callDuration, instancesReplaced, instancesRecycled, poolInstances,
			httpRequests, credentialReads, logDropped, httpCoalesced, httpRateWait, httpThrottled)
		sharedstate.RegisterMetrics()
	})
}
