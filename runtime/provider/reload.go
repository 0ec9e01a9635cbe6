package provider

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

var reloads = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "reloads_total",
	Help:           "Module reload attempts by result (loaded, rejected, rolled_back).",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

func init() { legacyregistry.MustRegister(reloads) }

// ReadModule reads the module cfg names and applies every check it asks
// for (sha256 pin, then signature, both over the file's bytes as stored),
// returning the decompressed wasm. The CCM and the wasmccm tool both load
// modules through it, so neither can skip a check the other makes.
func ReadModule(cfg ModuleConfig) ([]byte, error) {
	file, err := readModuleFile(cfg)
	return file.Wasm, err
}

func readModuleFile(cfg ModuleConfig) (modulefile.File, error) {
	return modulefile.Read(cfg.Path, cfg.trust())
}

// trust is what the module file must satisfy.
func (m ModuleConfig) trust() modulefile.Trust {
	return modulefile.Trust{SHA256: m.SHA256, PublicKeyPath: m.PublicKeyPath, SignaturePath: m.SignaturePath}
}

// rolloutTick paces a rollout begun at start, and the last-known-good
// record, when hot reload is off.
const rolloutTick = 5 * time.Second

// watch polls the module file, when hot reload is on, and takes the
// rollout and record decisions due. Polling rather than inotify: the
// kubelet updates a ConfigMap volume by swapping a "..data" symlink, which
// a per-file watch misses, and one stat-and-read every few seconds is
// cheap.
func (c *Cloud) watch(ctx context.Context) {
	reload := c.cfg.Module.ReloadInterval.Duration
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if reload > 0 {
			c.reloadIfChanged(ctx)
		}
		c.advanceRollout(ctx)
		c.recordLastKnownGood(ctx)
	}, orDefault(reload, rolloutTick))
}

// reloadIfChanged starts the rollout of the module file's new content, if
// any (rollout.go). The new module is compiled and initialised off the
// call path; any problem keeps the module in service.
func (c *Cloud) reloadIfChanged(ctx context.Context) {
	file, err := readModuleFile(c.cfg.Module)
	if err == nil && (file.Digest == c.served.Digest || file.Digest == c.candidate()) {
		return
	}
	if c.refused.covers(file, err) {
		return
	}
	var mod Backend
	if err == nil {
		mod, err = c.load(ctx, file)
	}
	if err != nil {
		c.refused = checksFailed(file, err)
		reloads.WithLabelValues("rejected").Inc()
		klog.ErrorS(err, "new module rejected; the current module stays in service",
			"path", c.cfg.Module.Path, "rejectedSHA256", file.Digest, "currentSHA256", c.served.Digest)
		c.events.emit(events.ModuleRejected,
			"new module "+file.Digest+" rejected, "+c.served.Digest+" stays in service: "+err.Error())
		return
	}
	c.refused = refusal{}
	c.startRollout(mod, file)
}

// refusal is the last module file refused, so that it is reported once,
// not at every poll. At most one field is set: digest when the file was
// refused for its behaviour (in shadow or probation), whatever its
// signature; checks when a check or the load failed, under everything
// the checks read (modulefile.File.Checked), so that a signature arriving
// for the same file has it checked again.
type refusal struct{ digest, checks string }

// checksFailed is the refusal of file, whose checks or load failed with
// err: what the checks read, or err when the file could not be read.
func checksFailed(file modulefile.File, err error) refusal {
	if file.Checked == "" {
		return refusal{checks: err.Error()}
	}
	return refusal{checks: file.Checked}
}

// covers reports whether file, read with err, is the one refused.
func (r refusal) covers(file modulefile.File, err error) bool {
	if err == nil {
		return file.Checked == r.checks || file.Digest == r.digest
	}
	return checksFailed(file, err) == r
}

// candidate is the digest of the module in shadow, if any.
func (c *Cloud) candidate() string {
	if r := c.rollout.Load(); r != nil && r.phase == lifecycle.Shadow {
		return r.file.Digest
	}
	return ""
}

// load compiles and initialises a module file, in shadow (its init
// included), and checks that it can stand in for the module in service.
func (c *Cloud) load(ctx context.Context, file modulefile.File) (Backend, error) {
	mod, err := c.instantiate(ctx, file, true)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(mod.Info().Capabilities, c.capabilities.Capabilities) {
		mod.Close(ctx)
		return nil, fmt.Errorf("new module's capabilities %v differ from %v, which the controllers were started with; restart the CCM to change them",
			mod.Info().Capabilities, c.capabilities.Capabilities)
	}
	return mod, nil
}

// instantiate compiles and initialises a module file with the grants of
// the cloud-config; shadow starts it as a candidate, which gets only the
// rate budget's spare room (host.RateBudget).
func (c *Cloud) instantiate(ctx context.Context, file modulefile.File, shadow bool) (Backend, error) {
	cfg := c.auth.hostConfig(c.cfg)
	cfg.HTTP.Shadow = shadow
	return host.New(ctx, file.Wasm, cfg)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
