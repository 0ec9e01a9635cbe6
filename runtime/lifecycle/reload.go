package lifecycle

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
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

var reloads = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "reloads_total",
	Help:           "Module reload attempts by result (loaded, rejected, rolled_back).",
	StabilityLevel: metrics.ALPHA,
}, []string{"module", "result"})

func init() { legacyregistry.MustRegister(reloads) }

// rolloutTick paces a rollout begun at start, and the last-known-good
// record, when hot reload is off.
const rolloutTick = 5 * time.Second

// watch polls the module file, when hot reload is on, and takes the
// rollout and record decisions due. Polling rather than inotify: the
// kubelet updates a ConfigMap volume by swapping a "..data" symlink, which
// a per-file watch misses, and one stat-and-read every few seconds is
// cheap.
func (m *Manager) watch(ctx context.Context) {
	reload, tick := m.opts.ReloadInterval, rolloutTick
	if reload > 0 {
		tick = reload
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if reload > 0 {
			m.Reload(ctx)
		}
		m.advanceRollout(ctx)
		m.recordLastKnownGood(ctx)
	}, tick)
}

// Reload starts the rollout of the module file's new content, if any
// (rollout.go); the reload goroutine calls it at every poll. The new
// module is compiled and initialised off the call path; any problem keeps
// the module in service.
func (m *Manager) Reload(ctx context.Context) {
	file, err := modulefile.Read(m.opts.Path, m.opts.Trust)
	if err == nil && (file.Digest == m.served.Digest || file.Digest == m.candidate()) {
		return
	}
	if m.refused.covers(file, err) {
		return
	}
	var mod Backend
	if err == nil {
		mod, err = m.load(ctx, file)
	}
	if err != nil {
		m.refused = checksFailed(file, err)
		reloads.WithLabelValues(m.opts.Name, "rejected").Inc()
		klog.ErrorS(err, "new module rejected; the current module stays in service",
			"path", m.opts.Path, "rejectedSHA256", file.Digest, "currentSHA256", m.served.Digest)
		m.opts.Emit(events.ModuleRejected,
			"new module "+file.Digest+" rejected, "+m.served.Digest+" stays in service: "+err.Error())
		return
	}
	m.refused = refusal{}
	m.startRollout(mod, file)
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
func (m *Manager) candidate() string {
	if r := m.rollout.Load(); r != nil && r.phase == decision.Shadow {
		return r.file.Digest
	}
	return ""
}

// load compiles and initialises a module file, in shadow (its init
// included), and checks that it can stand in for the module in service.
func (m *Manager) load(ctx context.Context, file modulefile.File) (Backend, error) {
	mod, err := m.opts.Load(ctx, file, true)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(mod.Info().Capabilities, m.capabilities.Capabilities) {
		mod.Close(ctx)
		return nil, fmt.Errorf("new module's capabilities %v differ from %v, which the controllers were started with; restart the CCM to change them",
			mod.Info().Capabilities, m.capabilities.Capabilities)
	}
	return mod, nil
}
