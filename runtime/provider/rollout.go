package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// Progressive rollout of a changed module file.
//
// A new module that validates and compiles is not put in service at once.
// It first runs in shadow: the module in service stays authoritative, and
// each read-only call it answers is asked again of the candidate, after
// the caller has its answer, and the two answers are compared (shadow.go).
// One destructive disagreement, or clearly more failures than the module
// in service, rejects the candidate; otherwise, once the shadow period is
// over, it is promoted. The module it replaced then stays compiled for the
// rollback window, and if the promoted module fails (traps, timeouts, ABI
// violations) too often, the host switches back. A rejected or rolled-back
// file is refused, by sha256, until the file changes again.
//
// At start-up the last-known-good record (lastknowngood.go) plays the
// previous module; without one (a first install) there is nothing to
// compare with or return to, and the deletion budget (deletionbudget.go)
// is what protects the Nodes from a bad module.

// Defaults of module.rollout.
const (
	defaultShadowDuration      = 2 * time.Minute
	defaultShadowCalls         = 20
	defaultShadowConcurrency   = 4
	defaultRollbackWindow      = 30 * time.Minute
	defaultRollbackMinCalls    = 20
	defaultRollbackFailPercent = 20
	// maxReported disagreements are named in a ModuleRejected Event.
	maxReported = 3
)

// RolloutConfig is module.rollout.
type RolloutConfig struct {
	Shadow   ShadowConfig   `json:"shadow,omitempty"`
	Rollback RollbackConfig `json:"rollback,omitempty"`
}

// ShadowConfig is module.rollout.shadow. A candidate is promoted once it
// has run in shadow for Duration (default 2m) and been compared on at
// least Calls calls (default 20), with at most Concurrency (default 4)
// shadow calls in flight; shadow calls beyond that are dropped and
// counted, never queued. A shadow call in which the rate budget had no
// spare room for one of the candidate's requests (host.ErrShadowThrottled)
// is not compared either, only counted: with a budget the module in
// service keeps full (a burst of 1), the candidate waits in shadow.
// Disabled puts a new module in service at once, as plain hot reload does:
// it is unsafe, since nothing then checks the new module's answers before
// the controllers act on them (the deletion budget still applies).
type ShadowConfig struct {
	Disabled    bool            `json:"disabled,omitempty"`
	Duration    metav1.Duration `json:"duration,omitempty"`
	Calls       int             `json:"calls,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`
}

// RollbackConfig is module.rollout.rollback. For Window (default 30m)
// after a promotion the previous module stays compiled; if at least
// MinCalls (default 20) calls reached the promoted module and
// FailurePercent (default 20) percent or more of them failed without an
// answer, the previous module is put back. Disabled drops the previous
// module at promotion.
type RollbackConfig struct {
	Disabled       bool            `json:"disabled,omitempty"`
	Window         metav1.Duration `json:"window,omitempty"`
	MinCalls       int             `json:"minCalls,omitempty"`
	FailurePercent int             `json:"failurePercent,omitempty"`
}

func (c RolloutConfig) validate() error {
	var errs []error
	if c.Shadow.Duration.Duration < 0 || c.Rollback.Window.Duration < 0 {
		errs = append(errs, errors.New("module.rollout durations must not be negative"))
	}
	if c.Shadow.Calls < 0 || c.Shadow.Concurrency < 0 || c.Shadow.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("module.rollout.shadow: calls must not be negative and concurrency must be in 0..64"))
	}
	if c.Rollback.MinCalls < 0 || c.Rollback.FailurePercent < 0 || c.Rollback.FailurePercent > 100 {
		errs = append(errs, fmt.Errorf("module.rollout.rollback: minCalls must not be negative and failurePercent must be in 0..100"))
	}
	return errors.Join(errs...)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

var shadowCalls = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "shadow_calls_total",
	Help:           "Calls asked of a candidate module in shadow, by comparison result (agree, benign, destructive, candidate_failed, in_service_failed), or not compared: dropped when the shadow concurrency was full, shadow_throttled when the rate budget had no spare room for one of the candidate's requests.",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

func init() { legacyregistry.MustRegister(shadowCalls) }

type rolloutPhase int

const (
	// phaseShadow: the candidate is compared, the old module answers.
	phaseShadow rolloutPhase = iota
	// phaseProbation: the new module answers, the old one waits.
	phaseProbation
)

// rollout is a module change in progress. The call path sees it through
// one atomic pointer, nil when no change is in progress; its decisions
// are taken by the reload goroutine.
type rollout struct {
	phase   rolloutPhase
	started time.Time
	// file is the new module's; other is the candidate in shadow, or the
	// previous module (otherFile) during probation.
	file      modulefile.File
	other     Backend
	otherFile modulefile.File

	// Shadow.
	sem   chan struct{}
	mu    sync.Mutex
	stats comparisonStats
	// probe is 0 before, 1 during and 2 after the probe of the Nodes.
	probe        atomic.Int32
	probedAll    atomic.Bool
	waitReported bool

	// Probation.
	calls, failures atomic.Int64
}

// comparisonStats sums a shadow period.
type comparisonStats struct {
	byVerdict [verdictInServiceFailed + 1]int
	dropped   int
	// throttled counts the calls left out because the rate budget refused
	// one of the candidate's requests (host.ErrShadowThrottled).
	throttled int
	first     []disagreement
}

func (s *comparisonStats) compared() int {
	n := 0
	for _, c := range s.byVerdict {
		n += c
	}
	return n
}

func (s comparisonStats) String() string {
	return fmt.Sprintf("%d calls compared: %d agreed, %d benign differences, %d destructive, %d failed only on the new module, %d failed only on the module in service; %d shadow calls dropped, %d not compared because the rate budget (http.rateLimits) had no spare room for the new module",
		s.compared(), s.byVerdict[verdictAgree], s.byVerdict[verdictBenign], s.byVerdict[verdictDestructive],
		s.byVerdict[verdictCandidateFailed], s.byVerdict[verdictInServiceFailed], s.dropped, s.throttled)
}

// observe sees every answer of the module in service while a rollout is in
// progress.
func (r *rollout) observe(ctx context.Context, export string, in, out abi.Message, err error) {
	if r.phase == phaseProbation {
		r.calls.Add(1)
		if isModuleFailure(err) {
			r.failures.Add(1)
		}
		return
	}
	if !shadowedExports[export] {
		return
	}
	select {
	case r.sem <- struct{}{}:
	default:
		shadowCalls.WithLabelValues("dropped").Inc()
		r.mu.Lock()
		r.stats.dropped++
		r.mu.Unlock()
		return
	}
	go func() {
		defer func() { <-r.sem }()
		r.shadow(ctx, export, in, answer{out, err})
	}()
}

// shadow asks the candidate the question the module in service answered,
// with the caller's deadline but not its cancellation (the caller has its
// answer and may have moved on), and records the comparison. It reports
// whether the call was compared: a call in which the rate budget refused
// the candidate a request is only counted, since the candidate's answer
// was shaped by the host's refusal and is no evidence either way.
func (r *rollout) shadow(callerCtx context.Context, export string, in abi.Message, inService answer) (compared bool) {
	ctx := context.WithoutCancel(callerCtx)
	if deadline, ok := callerCtx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	candidate := answer{out: newAnswer(inService.out)}
	candidate.err = r.other.Call(ctx, export, in, candidate.out)
	if errors.Is(candidate.err, host.ErrClosed) {
		return false // the rollout ended meanwhile
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(candidate.err, host.ErrShadowThrottled) {
		shadowCalls.WithLabelValues(host.ReasonShadowThrottled).Inc()
		r.stats.throttled++
		return false
	}
	v := compareAnswers(export, inService, candidate)
	shadowCalls.WithLabelValues(v.String()).Inc()
	r.stats.byVerdict[v]++
	if v == verdictDestructive || v == verdictCandidateFailed {
		r.stats.report(disagreement{
			export: strings.TrimPrefix(export, "wasmccm_"), subject: subject(in),
			inService: describe(export, inService), candidate: describe(export, candidate),
			destructive: v == verdictDestructive,
		})
	}
	return true
}

// report keeps the first maxReported disagreements, destructive ones
// before failures: they are what a rejection is about.
func (s *comparisonStats) report(d disagreement) {
	if len(s.first) < maxReported {
		s.first = append(s.first, d)
		return
	}
	if d.destructive {
		for i := range s.first {
			if !s.first[i].destructive {
				s.first[i] = d
				return
			}
		}
	}
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
func (c *Cloud) startRollout(mod Backend, file modulefile.File) {
	c.endRollout()
	setShadow(mod, true)
	cfg := c.cfg.Module.Rollout.Shadow
	if cfg.Disabled {
		c.promote(mod, file, "shadow comparison disabled")
		return
	}
	digest := file.Digest
	r := &rollout{
		phase: phaseShadow, started: time.Now(), file: file, other: mod,
		sem: make(chan struct{}, orDefault(cfg.Concurrency, defaultShadowConcurrency)),
	}
	c.rollout.Store(r)
	msg := fmt.Sprintf("new module %s in shadow: %s stays in service until the new one has been compared on %d calls over at least %s",
		digest, c.served.Digest, orDefault(cfg.Calls, defaultShadowCalls), orDefault(cfg.Duration.Duration, defaultShadowDuration))
	klog.InfoS("new module in shadow", "path", c.cfg.Module.Path, "candidateSHA256", digest, "currentSHA256", c.served.Digest)
	c.events.emit(events.ModuleShadowing, msg)
}

// advanceRollout takes the decisions due; the reload goroutine calls it at
// every poll.
func (c *Cloud) advanceRollout(ctx context.Context) {
	r := c.rollout.Load()
	if r == nil {
		return
	}
	if r.phase == phaseProbation {
		c.judgeProbation(r)
		return
	}
	cfg := c.cfg.Module.Rollout.Shadow
	// Read before the stats: a finished probe's comparisons are in them.
	probe := r.probe.Load()
	r.mu.Lock()
	stats := r.stats
	stats.first = append([]disagreement(nil), r.stats.first...)
	r.mu.Unlock()
	compared := stats.compared()
	excess := stats.byVerdict[verdictCandidateFailed] - stats.byVerdict[verdictInServiceFailed]
	switch {
	case stats.byVerdict[verdictDestructive] > 0:
		c.rejectCandidate(r, "it answered that resources are gone which the module in service reports present", stats)
		return
	case excess >= max(3, compared/10):
		c.rejectCandidate(r, "it failed clearly more often than the module in service", stats)
		return
	}
	calls := orDefault(cfg.Calls, defaultShadowCalls)
	if time.Since(r.started) < orDefault(cfg.Duration.Duration, defaultShadowDuration) {
		return
	}
	switch probe {
	case 0:
		// Controllers ask about NotReady Nodes only: ask both modules
		// about the Nodes, whatever the traffic was.
		r.probe.Store(1)
		go c.probeNodes(context.WithoutCancel(ctx), r, calls)
		return
	case 1:
		return
	}
	// Enough comparisons, or fewer Nodes than calls and every one compared.
	if compared < calls && !(r.probedAll.Load() && compared > 0) {
		if !r.waitReported {
			r.waitReported = true
			msg := fmt.Sprintf("new module %s stays in shadow: %d of %d comparisons so far (%s); it is promoted when enough calls were compared",
				r.file.Digest, compared, calls, stats)
			klog.InfoS("new module waits in shadow for more comparisons", "candidateSHA256", r.file.Digest, "compared", compared, "needed", calls)
			c.events.emit(events.ModuleShadowing, msg)
		}
		return
	}
	c.promote(r.other, r.file, stats.String())
}

// probeNodes compares both modules' answers to InstanceExists (or its
// legacy equivalents) for up to limit Nodes from the cache, at the end of
// every shadow period. Controllers ask about NotReady Nodes only, so
// without the probe a candidate that answers "gone" for every Node would
// pass a shadow period in a healthy cluster, and delete Nodes as soon as
// they became NotReady. It costs two cloud calls per Node probed, once per
// rollout. probedAll is set only if every Node was compared: a Node whose
// call the rate budget left uncompared was not probed.
func (c *Cloud) probeNodes(ctx context.Context, r *rollout, limit int) {
	defer r.probe.Store(2)
	nodes := c.listNodes()
	all := len(nodes) <= limit
	defer func() { r.probedAll.Store(all) }()
	for i, node := range nodes {
		if i == limit || c.rollout.Load() != r {
			return
		}
		export, in, out := c.existenceQuestion(node)
		err := (*c.backend.Load()).Call(ctx, export, in, out)
		r.sem <- struct{}{}
		all = r.shadow(ctx, export, in, answer{out, err}) && all
		<-r.sem
	}
}

// existenceQuestion is the call the lifecycle controller would make to
// decide whether node is gone.
func (c *Cloud) existenceQuestion(node *v1.Node) (string, abi.Message, abi.Message) {
	switch {
	case c.supports(abi.CapabilityInstancesV2):
		n := toNode(node)
		return abi.ExportInstanceExists, &n, new(abi.Bool)
	case node.Spec.ProviderID != "":
		id := abi.String(node.Spec.ProviderID)
		return abi.ExportInstanceExistsByProviderID, &id, new(abi.Bool)
	}
	name := abi.String(node.Name)
	return abi.ExportInstanceID, &name, new(abi.String)
}

// rejectCandidate ends a shadow period with the old module in service.
func (c *Cloud) rejectCandidate(r *rollout, why string, stats comparisonStats) {
	c.rollout.Store(nil)
	closeLater(r.other, "the rejected module")
	c.rejected = r.file.Digest
	reloads.WithLabelValues("rejected").Inc()
	names := make([]string, len(stats.first))
	for i, d := range stats.first {
		names[i] = d.String()
	}
	klog.ErrorS(nil, "new module rejected in shadow; the current module stays in service", "reason", why,
		"rejectedSHA256", r.file.Digest, "currentSHA256", c.served.Digest, "disagreements", names, "comparison", stats.String())
	c.events.emit(events.ModuleRejected, fmt.Sprintf("new module %s rejected, %s stays in service: %s; first disagreements: %s; %s",
		r.file.Digest, c.served.Digest, why, strings.Join(names, "; "), stats))
}

// promote puts mod in service and keeps the module it replaces for the
// rollback window.
func (c *Cloud) promote(mod Backend, file modulefile.File, summary string) {
	setShadow(mod, false)
	previous := *c.backend.Swap(&mod)
	previousFile, digest, previousDigest := c.served, file.Digest, c.served.Digest
	c.serve(file)
	c.rejected = ""
	reloads.WithLabelValues("loaded").Inc()
	klog.InfoS("provider module reloaded", "path", c.cfg.Module.Path, "sha256", digest, "previousSHA256", previousDigest, "comparison", summary)
	c.events.emit(events.ModuleReloaded, "module "+digest+" in service ("+summary+")")
	if c.cfg.Module.Rollout.Rollback.Disabled {
		c.rollout.Store(nil)
		closeLater(previous, "the replaced module")
		return
	}
	c.rollout.Store(&rollout{phase: phaseProbation, started: time.Now(), file: file, other: previous, otherFile: previousFile})
}

// judgeProbation rolls back a promoted module that fails too often, or
// releases the previous one at the end of the window.
func (c *Cloud) judgeProbation(r *rollout) {
	cfg := c.cfg.Module.Rollout.Rollback
	calls, failures := r.calls.Load(), r.failures.Load()
	if calls >= int64(orDefault(cfg.MinCalls, defaultRollbackMinCalls)) &&
		failures*100 >= calls*int64(orDefault(cfg.FailurePercent, defaultRollbackFailPercent)) {
		bad := *c.backend.Swap(&r.other)
		c.rollout.Store(nil)
		closeLater(bad, "the rolled-back module")
		c.serve(r.otherFile)
		c.rejected = r.file.Digest
		reloads.WithLabelValues("rolled_back").Inc()
		msg := fmt.Sprintf("module %s rolled back to %s: %d of %d calls failed without an answer (trap, timeout or ABI violation) within %s of its promotion; %s is refused until the module file changes",
			r.file.Digest, r.otherFile.Digest, failures, calls, time.Since(r.started).Round(time.Second), r.file.Digest)
		klog.ErrorS(nil, "provider module rolled back", "rolledBackSHA256", r.file.Digest, "currentSHA256", r.otherFile.Digest, "failed", failures, "calls", calls)
		c.events.emit(events.ModuleRolledBack, msg)
		return
	}
	if time.Since(r.started) >= orDefault(cfg.Window.Duration, defaultRollbackWindow) {
		c.rollout.Store(nil)
		closeLater(r.other, "the previous module")
		klog.InfoS("rollback window over; previous module released", "sha256", r.file.Digest, "previousSHA256", r.otherFile.Digest, "calls", calls, "failed", failures)
	}
}

// endRollout settles a rollout superseded by a newer module file: a
// candidate in shadow is dropped, a promoted module keeps its place.
func (c *Cloud) endRollout() {
	r := c.rollout.Swap(nil)
	if r == nil {
		return
	}
	what := "the superseded candidate"
	if r.phase == phaseProbation {
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
