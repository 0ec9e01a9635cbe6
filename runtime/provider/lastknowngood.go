package provider

import (
	"context"
	"os"
	"time"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The last-known-good module.
//
// A module file changed while the CCM runs goes through the rollout guard
// (rollout.go); a restart would skip it, and restarts are routine (drains,
// upgrades, evictions, OOM kills, any other cloud-config change). So the
// leader records in the cluster the module that proved itself in service,
// and a CCM that starts with another module serves the recorded one and
// rolls the configured one out through the same shadow period as a hot
// reload. A configured module that cannot be read, verified or loaded is
// then a rejected update, not a CCM that cannot start.
//
// The record is ConfigMaps in the CCM's namespace (modulefile.Store). A
// module is recorded when it has served its rollback window without being
// rolled back (at once when rollback is disabled): known good, not merely
// promoted. It is checked when read as modulefile.Record.File says.

// Defaults of module.lastKnownGood.
const (
	defaultLastKnownGoodName      = "wasmccm-last-known-good"
	defaultLastKnownGoodNamespace = "kube-system"
)

// LastKnownGoodConfig is module.lastKnownGood.
type LastKnownGoodConfig struct {
	// Disabled turns the record off: every start then serves the configured
	// module unshadowed, as a first install does.
	Disabled bool `json:"disabled,omitempty"`
	// Namespace defaults to the POD_NAMESPACE environment variable, else
	// kube-system; Name to wasmccm-last-known-good.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ChunkNames lists every ConfigMap the record may use, for RBAC.
func (c LastKnownGoodConfig) ChunkNames() []string {
	return modulefile.RecordNames(orDefault(c.Name, defaultLastKnownGoodName))
}

var moduleStarts = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "starts_total",
	Help: "CCM starts by the module served (configured, last_known_good) and why: first_install, recorded (the configured module is the last-known-good), " +
		"shadowing (the configured module differs and is rolled out), configured_unusable, last_known_good_unusable, capabilities_changed.",
	StabilityLevel: metrics.ALPHA,
}, []string{"served", "reason"})

func init() { legacyregistry.MustRegister(moduleStarts) }

func newLastKnownGoodStore(client typedcorev1.ConfigMapsGetter, cfg LastKnownGoodConfig) *modulefile.Store {
	namespace := cfg.Namespace
	if namespace == "" {
		namespace = orDefault(os.Getenv("POD_NAMESPACE"), defaultLastKnownGoodNamespace)
	}
	return modulefile.NewStore(client, namespace, orDefault(cfg.Name, defaultLastKnownGoodName))
}

// recordLastKnownGood records the module in service once it has served
// its rollback window. The reload goroutine calls it at every poll; a
// failed write is retried at the next poll and reported once.
func (c *Cloud) recordLastKnownGood(ctx context.Context) {
	if c.lastKnownGood == nil || c.served.Digest == c.recorded || c.rollout.Load() != nil {
		return
	}
	if rb := c.cfg.Module.Rollout.Rollback.WithDefaults(); !rb.Disabled && time.Since(c.servedSince) < rb.Window.Duration {
		return
	}
	source := c.cfg.Module.Path
	if c.cfg.Module.Image != "" {
		source = c.cfg.Module.Image
	}
	if err := c.lastKnownGood.Save(ctx, c.served, source); err != nil {
		if c.recordFailed != c.served.Digest {
			c.recordFailed = c.served.Digest
			klog.ErrorS(err, "recording the last-known-good module failed; retrying", "record", c.lastKnownGood, "sha256", c.served.Digest)
		}
		return
	}
	c.recorded, c.recordFailed = c.served.Digest, ""
	klog.InfoS("last-known-good module recorded", "record", c.lastKnownGood, "sha256", c.served.Digest, "source", source)
}
