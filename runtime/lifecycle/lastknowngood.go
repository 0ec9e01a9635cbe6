package lifecycle

import (
	"context"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// The last-known-good module.
//
// A module file changed while the CCM runs goes through the rollout guard
// (rollout.go); a restart would skip it, and restarts are routine (drains,
// upgrades, evictions, OOM kills, any other cloud-config change). So the
// leader records in the cluster the module that proved itself in service,
// and a CCM that starts with another module serves the recorded one and
// rolls the configured one out through the same shadow period as a hot
// reload (Start). A configured module that cannot be read, verified or
// loaded is then a rejected update, not a CCM that cannot start.
//
// The record is ConfigMaps in the CCM's namespace (modulefile.Store). A
// module is recorded when it has served its rollback window without being
// rolled back (at once when rollback is disabled): known good, not merely
// promoted. It is checked when read as modulefile.Record.File says.

var moduleStarts = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "starts_total",
	Help: "CCM starts by the module served (configured, last_known_good) and why: first_install, recorded (the configured module is the last-known-good), " +
		"shadowing (the configured module differs and is rolled out), configured_unusable, last_known_good_unusable, capabilities_changed.",
	StabilityLevel: metrics.ALPHA,
}, []string{"module", "served", "reason"})

func init() { legacyregistry.MustRegister(moduleStarts) }

// recordLastKnownGood records the module in service once it has served
// its rollback window. The reload goroutine calls it at every poll; a
// failed write is retried at the next poll and reported once.
func (m *Manager) recordLastKnownGood(ctx context.Context) {
	if m.opts.Record == nil || m.served.Digest == m.recorded || m.rollout.Load() != nil {
		return
	}
	if rb := m.opts.Rollout.Rollback.WithDefaults(); !rb.Disabled && time.Since(m.servedSince) < rb.Window.Duration {
		return
	}
	if err := m.opts.Record.Save(ctx, m.served, m.opts.Source); err != nil {
		if m.recordFailed != m.served.Digest {
			m.recordFailed = m.served.Digest
			klog.ErrorS(err, "recording the last-known-good module failed; retrying", "record", m.opts.Record, "sha256", m.served.Digest)
		}
		return
	}
	m.recorded, m.recordFailed = m.served.Digest, ""
	klog.InfoS("last-known-good module recorded", "record", m.opts.Record, "sha256", m.served.Digest, "source", m.opts.Source)
}
