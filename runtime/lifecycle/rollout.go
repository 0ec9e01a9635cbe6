package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The rollout of a changed module file, as judge.go decides: shadow
// calls, the probe of the Nodes, promotion, rejection and rollback, with
// their metrics, logs and Events.

var shadowCalls = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "shadow_calls_total",
	Help:           "Calls asked of a candidate module in shadow, by comparison result (agree, benign, destructive, candidate_failed, in_service_failed), or not compared: dropped when the shadow concurrency was full, shadow_throttled when the rate budget had no spare room for one of the candidate's requests.",
	StabilityLevel: metrics.ALPHA,
}, []string{"module", "result"})

func init() { legacyregistry.MustRegister(shadowCalls) }

// rollout is a module change in progress. The call path sees it through
// one atomic pointer, nil when no change is in progress; its decisions
// are taken by the reload goroutine.
type rollout struct {
	// module labels the shadow's metrics (Options.Name).
	module  string
	phase   decision.Phase
	started time.Time
	// file is the new module's; other is the candidate in shadow, or the
	// previous module (otherFile) during probation.
	file      modulefile.File
	other     Backend
	otherFile modulefile.File

	// Shadow.
	sem   chan struct{}
	mu    sync.Mutex
	stats decision.Stats
	// probe is the progress of the probe of the Nodes (a NodeProbe).
	probe        atomic.Int32
	probedAll    atomic.Bool
	waitReported bool

	// Probation.
	calls, failures atomic.Int64
}

// observe sees every answer of the module in service while a rollout is in
// progress.
func (r *rollout) observe(ctx context.Context, export string, in, out abi.Message, err error) {
	if r.phase == decision.Probation {
		r.calls.Add(1)
		if isModuleFailure(err) {
			r.failures.Add(1)
		}
		return
	}
	if !decision.Shadowed(export) {
		return
	}
	select {
	case r.sem <- struct{}{}:
	default:
		shadowCalls.WithLabelValues(r.module, "dropped").Inc()
		r.mu.Lock()
		r.stats.Dropped++
		r.mu.Unlock()
		return
	}
	go func() {
		defer func() { <-r.sem }()
		r.shadow(ctx, export, in, decision.Answer{Out: out, Err: err})
	}()
}

// shadow asks the candidate the question the module in service answered,
// with the caller's deadline but not its cancellation (the caller has its
// answer and may have moved on), and records the comparison. It reports
// whether the call was compared: a call in which the rate budget refused
// the candidate a request is only counted, since the candidate's answer
// was shaped by the host's refusal and is no evidence either way.
func (r *rollout) shadow(callerCtx context.Context, export string, in abi.Message, inService decision.Answer) (compared bool) {
	ctx := context.WithoutCancel(callerCtx)
	if deadline, ok := callerCtx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	candidate := decision.Answer{Out: decision.NewOut(inService.Out)}
	candidate.Err = r.other.Call(ctx, export, in, candidate.Out)
	if errors.Is(candidate.Err, host.ErrClosed) {
		return false // the rollout ended meanwhile
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(candidate.Err, host.ErrShadowThrottled) {
		shadowCalls.WithLabelValues(r.module, host.ReasonShadowThrottled).Inc()
		r.stats.Throttled++
		return false
	}
	v := r.stats.Record(export, in, inService, candidate)
	shadowCalls.WithLabelValues(r.module, v.String()).Inc()
	return true
}

// isModuleFailure reports a call the module did not answer for reasons of
// its own: it trapped, ran out of time or broke the ABI. Errors the module
// answered do not count (the old module would have met the same cloud),
// nor do calls canceled by their caller or refused while the module was
// being replaced, nor a shadow's answer withheld because the rate budget
// refused it a request (host.ReasonShadowThrottled).
func isModuleFailure(err error) bool {
	var failure *host.FailureError
	if !errors.As(err, &failure) {
		return false
	}
	switch failure.Reason {
	case host.ReasonTrap, host.ReasonTimeout, host.ReasonABIViolation:
		return true
	}
	return false
}

// startRollout takes a new module, compiled and checked, into service: in
// shadow, or at once when shadowing is disabled.
func (m *Manager) startRollout(mod Backend, file modulefile.File) {
	m.endRollout()
	setShadow(mod, true)
	cfg := m.opts.Rollout.Shadow.WithDefaults()
	if cfg.Disabled {
		m.promote(mod, file, "shadow comparison disabled")
		return
	}
	digest := file.Digest
	r := &rollout{
		module: m.opts.Name, phase: decision.Shadow, started: time.Now(), file: withoutWasm(file), other: mod,
		sem: make(chan struct{}, cfg.Concurrency),
	}
	m.rollout.Store(r)
	msg := fmt.Sprintf("new module %s in shadow: %s stays in service until the new one has been compared on %d calls over at least %s",
		digest, m.served.Digest, cfg.Calls, cfg.Duration.Duration)
	klog.InfoS("new module in shadow", "path", m.opts.Path, "candidateSHA256", digest, "currentSHA256", m.served.Digest)
	m.opts.Emit(events.ModuleShadowing, msg)
}

// advanceRollout takes the decisions due; the reload goroutine calls it at
// every poll.
func (m *Manager) advanceRollout(ctx context.Context) {
	r := m.rollout.Load()
	if r == nil {
		return
	}
	if r.phase == decision.Probation {
		m.judgeProbation(r)
		return
	}
	cfg := m.opts.Rollout.Shadow.WithDefaults()
	// Read before the stats: a finished probe's comparisons are in them.
	probe := decision.NodeProbe(r.probe.Load())
	r.mu.Lock()
	stats := r.stats.Clone()
	r.mu.Unlock()
	action, why := decision.JudgeShadow(cfg, stats, time.Since(r.started), probe, r.probedAll.Load())
	switch action {
	case decision.Reject:
		m.rejectCandidate(r, why, stats)
	case decision.StartNodeProbe:
		r.probe.Store(int32(decision.NodeProbeRunning))
		go m.probeNodes(context.WithoutCancel(ctx), r, cfg.Calls)
	case decision.AwaitComparisons:
		if !r.waitReported {
			r.waitReported = true
			compared := stats.Compared()
			msg := fmt.Sprintf("new module %s stays in shadow: %d of %d comparisons so far (%s); it is promoted when enough calls were compared",
				r.file.Digest, compared, cfg.Calls, stats)
			klog.InfoS("new module waits in shadow for more comparisons", "candidateSHA256", r.file.Digest, "compared", compared, "needed", cfg.Calls)
			m.opts.Emit(events.ModuleShadowing, msg)
		}
	case decision.Promote:
		m.promote(r.other, r.file, stats.String())
	}
}

// probeNodes compares both modules' answers to InstanceExists (or its
// legacy equivalents) for up to limit Nodes from the cache, at the end of
// every shadow period. Controllers ask about NotReady Nodes only, so
// without the probe a candidate that answers "gone" for every Node would
// pass a shadow period in a healthy cluster, and delete Nodes as soon as
// they became NotReady. It costs two cloud calls per Node probed, once per
// rollout. probedAll is set only if every Node was compared: a Node whose
// call the rate budget left uncompared was not probed.
func (m *Manager) probeNodes(ctx context.Context, r *rollout, limit int) {
	defer r.probe.Store(int32(decision.NodeProbeDone))
	nodes := m.opts.ListNodes()
	all := len(nodes) <= limit
	defer func() { r.probedAll.Store(all) }()
	for i, node := range nodes {
		if i == limit || m.rollout.Load() != r {
			return
		}
		export, in, out := m.opts.ExistenceQuestion(node)
		_, err := m.OnInService(func(b Backend) error { return b.Call(ctx, export, in, out) })
		r.sem <- struct{}{}
		all = r.shadow(ctx, export, in, decision.Answer{Out: out, Err: err}) && all
		<-r.sem
	}
}

// rejectCandidate ends a shadow period with the old module in service.
func (m *Manager) rejectCandidate(r *rollout, why string, stats decision.Stats) {
	m.rollout.Store(nil)
	closeLater(r.other, "the rejected module")
	m.refused = refusal{digest: r.file.Digest}
	reloads.WithLabelValues(m.opts.Name, "rejected").Inc()
	names := make([]string, len(stats.First))
	for i, d := range stats.First {
		names[i] = d.String()
	}
	klog.ErrorS(nil, "new module rejected in shadow; the current module stays in service", "reason", why,
		"rejectedSHA256", r.file.Digest, "currentSHA256", m.served.Digest, "disagreements", names, "comparison", stats.String())
	m.opts.Emit(events.ModuleRejected, fmt.Sprintf("new module %s rejected, %s stays in service: %s; first disagreements: %s; %s",
		r.file.Digest, m.served.Digest, why, strings.Join(names, "; "), stats))
}

// promote puts mod in service and keeps the module it replaces for the
// rollback window.
func (m *Manager) promote(mod Backend, file modulefile.File, summary string) {
	setShadow(mod, false)
	previous := *m.backend.Swap(&mod)
	previousFile, digest, previousDigest := m.served, file.Digest, m.served.Digest
	m.serve(file)
	m.refused = refusal{}
	reloads.WithLabelValues(m.opts.Name, "loaded").Inc()
	klog.InfoS("provider module reloaded", "path", m.opts.Path, "sha256", digest, "previousSHA256", previousDigest, "comparison", summary)
	m.opts.Emit(events.ModuleReloaded, "module "+digest+" in service ("+summary+")")
	// A promotion is taken from Shadow, shadowing disabled or not, and
	// always leads somewhere.
	next, _ := decision.Next(decision.Shadow, decision.Promoted, !m.opts.Rollout.Rollback.Disabled)
	if next != decision.Probation {
		m.rollout.Store(nil)
		closeLater(previous, "the replaced module")
		return
	}
	m.rollout.Store(&rollout{phase: next, started: time.Now(), file: withoutWasm(file), other: previous, otherFile: previousFile})
}

// judgeProbation rolls back a promoted module that fails too often, or
// releases the previous one at the end of the window.
func (m *Manager) judgeProbation(r *rollout) {
	calls, failures := r.calls.Load(), r.failures.Load()
	switch decision.JudgeProbation(m.opts.Rollout.Rollback.WithDefaults(), calls, failures, time.Since(r.started)) {
	case decision.RollBack:
		bad := *m.backend.Swap(&r.other)
		m.rollout.Store(nil)
		closeLater(bad, "the rolled-back module")
		m.serve(r.otherFile)
		m.refused = refusal{digest: r.file.Digest}
		reloads.WithLabelValues(m.opts.Name, "rolled_back").Inc()
		msg := fmt.Sprintf("module %s rolled back to %s: %d of %d calls failed without an answer (trap, timeout or ABI violation) within %s of its promotion; %s is refused until the module file changes",
			r.file.Digest, r.otherFile.Digest, failures, calls, time.Since(r.started).Round(time.Second), r.file.Digest)
		klog.ErrorS(nil, "provider module rolled back", "rolledBackSHA256", r.file.Digest, "currentSHA256", r.otherFile.Digest, "failed", failures, "calls", calls)
		m.opts.Emit(events.ModuleRolledBack, msg)
	case decision.Release:
		m.rollout.Store(nil)
		closeLater(r.other, "the previous module")
		klog.InfoS("rollback window over; previous module released", "sha256", r.file.Digest, "previousSHA256", r.otherFile.Digest, "calls", calls, "failed", failures)
	}
}

// endRollout settles a rollout superseded by a newer module file: a
// candidate in shadow is dropped, a promoted module keeps its place.
func (m *Manager) endRollout() {
	r := m.rollout.Swap(nil)
	if r == nil {
		return
	}
	what := "the superseded candidate"
	if r.phase == decision.Probation {
		what = "the previous module"
	}
	closeLater(r.other, what)
}

// setShadow tells a module whether it is a candidate in shadow, whose
// requests must never delay the module in service's: a *host.Module then
// gets only the rate budget's spare room. Other backends share no budget.
func setShadow(b Backend, shadow bool) {
	if m, ok := b.(interface{ SetShadow(bool) }); ok {
		m.SetShadow(shadow)
	}
}

// defaultReloadGrace bounds how long a replaced module may finish
// in-flight calls before it is closed anyway.
const defaultReloadGrace = 2 * time.Minute

// closeLater closes a module no longer in service once the calls still
// running on it finish, or after defaultReloadGrace.
func closeLater(b Backend, what string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), defaultReloadGrace)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			klog.ErrorS(err, "closing "+what)
		}
	}()
}
