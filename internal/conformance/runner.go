package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// outcome is what one module call answered and the requests it made.
type outcome struct {
	export   string // e.g. abi.ExportInstanceExists
	method   string // its name, e.g. InstanceExists
	out      abi.Message
	status   abi.Status
	after    time.Duration
	err      error
	trace    []Exchange
	elapsed  time.Duration
	injected bool // a fault was injected into one of its requests
	// overran says the call had no answer of its own deadlineMargin
	// before its deadline, the call timeout: the host stopped it, or it
	// answered too late for the controllers to use it.
	overran bool
	// timeout is the call timeout it ran under, for the message.
	timeout time.Duration
	// retries counts the calls again after RetryAfter that this outcome's
	// trace includes (call).
	retries int
}

func (o *outcome) ok() bool { return o.err == nil }

// cloudThrottled reports whether the cloud itself answered 429 to one of
// the call's requests and the module saw it.
func (o *outcome) cloudThrottled() bool {
	return slices.ContainsFunc(o.trace, func(ex Exchange) bool { return ex.CloudThrottled })
}

func (o *outcome) String() string {
	if o.err != nil {
		return fmt.Sprintf("%s: %v", o.status, o.err)
	}
	if o.out == nil {
		return "OK"
	}
	b, _ := json.Marshal(o.out)
	return "OK " + string(b)
}

// call runs one export from empty shared state, so that it reaches the
// cloud and its requests can be faulted; warmCall keeps what earlier calls
// left. A clean mutating call that answers RetryAfter is made again after
// it, as the controllers do, for up to the run's settle time: a slow cloud
// acts across calls. The outcome is the last call's, with the trace of
// them all. A faulted call is never made again: its answer is judged.
func (r *runner) call(export string, in abi.Message, out func() abi.Message) *outcome {
	r.mod.ClearState()
	o := r.warmCall(export, in, out)
	if !settles[export] || r.ic.armed() {
		return o
	}
	var waited time.Duration
	for o.status == abi.StatusRetryAfter {
		wait := cmp.Or(r.retryWait, o.after, time.Second)
		if waited+wait > r.settle || sleepCtx(r.ctx, wait) != nil {
			break
		}
		waited += wait
		next := r.warmCall(export, in, out)
		next.trace = append(o.trace, next.trace...)
		next.retries = o.retries + 1
		o = next
	}
	return o
}

// settles are the exports a controller calls again after RetryAfter until
// the cloud has acted: the service controller requeues the Service, the
// route controller reconciles again.
var settles = map[string]bool{
	abi.ExportEnsureLoadBalancer: true, abi.ExportUpdateLoadBalancer: true, abi.ExportEnsureLoadBalancerDeleted: true,
	abi.ExportCreateRoute: true, abi.ExportDeleteRoute: true,
}

// deadlineMargin is how long before its deadline a call must answer: an
// answer later than that is lost to the controller when the call's
// request, the CCM's own work or scheduling takes the rest.
const deadlineMargin = 100 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *runner) warmCall(export string, in abi.Message, out func() abi.Message) *outcome {
	o := &outcome{export: export, method: methodName(export), timeout: r.callTimeout}
	if out != nil {
		o.out = out()
	}
	mark, start := r.ic.Mark(), time.Now()
	o.err = r.mod.Call(r.ctx, export, in, o.out)
	o.elapsed, o.trace = time.Since(start), r.ic.Since(mark)
	var se *host.StatusError
	var fe *host.FailureError
	o.overran = errors.As(o.err, &fe) && fe.Reason == host.ReasonTimeout || o.elapsed > r.callTimeout-deadlineMargin
	r.calls++
	if r.slowest == nil || o.elapsed > r.slowest.elapsed {
		r.slowest = o
	}
	switch {
	case o.err == nil:
		o.status = abi.StatusOK
		if o.out != nil {
			b, _ := json.Marshal(o.out)
			r.texts = append(r.texts, text{"the result of " + o.method, string(b)})
		}
	case errors.As(o.err, &se):
		o.status, o.after = se.Status, se.RetryAfter
	default:
		o.status = abi.StatusError // trap, timeout: no answer at all
	}
	if o.err != nil {
		r.texts = append(r.texts, text{"the error of " + o.method, o.err.Error()})
	}
	return o
}

// deadlines records call-deadline for the run: a pass naming the slowest
// call, unless a check already failed the rule; a call no check judged
// (one of the warm phase) that overran fails it here.
func (r *runner) deadlines() {
	if r.slowest == nil || slices.ContainsFunc(r.report.Results, func(res Result) bool { return res.Rule == RuleCallDeadline && res.Failure != "" }) {
		return
	}
	o := r.slowest
	r.check(RuleCallDeadline, fmt.Sprintf("%d calls answered before their %s deadline; the slowest, %s, in %s", r.calls, r.callTimeout, o.method, o.elapsed.Round(time.Millisecond)), "", o)
}

// with runs call with mod in place of the module under test: the module
// started with the limited credentials, or for another cluster.
func (r *runner) with(mod *host.Module, call func() *outcome) *outcome {
	full := r.mod
	r.mod = mod
	defer func() { r.mod = full }()
	return call()
}

func (r *runner) pass(rule, name string) {
	if r.capped() {
		return
	}
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name})
}

func (r *runner) skip(rule, name, why string) {
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Skipped: why})
}

func (r *runner) fail(rule, name, why string, trace []Exchange) {
	if r.capped() {
		return
	}
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Failure: why, Trace: trace})
}

// check records the call o as a pass or, when why is not "", a failure,
// and reports whether it passed. A failure of a call that saw the cloud's
// own 429 is not the module's: it is recorded as skipped, with why.
func (r *runner) check(rule, name, why string, o *outcome) bool {
	if o.retries > 0 {
		name += fmt.Sprintf(" (called %d more times after RetryAfter)", o.retries)
	}
	if r.capped() {
		return false
	}
	if o.overran {
		rule, why = RuleCallDeadline, deadlineEvidence{method: o.method, elapsed: o.elapsed, timeout: o.timeout}.String()
	}
	if why == "" {
		r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Duration: o.elapsed})
		return true
	}
	if o.cloudThrottled() {
		r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Duration: o.elapsed,
			Skipped: "not scored: the cloud itself answered 429 for longer than the call could wait (rerun with a lower -rate); the module answered " + o.String()})
		return false
	}
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Failure: why + "\nmodule answered: " + o.String(),
		Trace: o.trace, Duration: o.elapsed})
	return false
}

// capped reports whether the run reached its cap on requests, and
// records that once: what runs after it is not scored.
func (r *runner) capped() bool {
	if _, capped := r.ic.Sent(); !capped {
		return false
	}
	if !r.cappedNoted {
		r.cappedNoted = true
		r.report.Results = append(r.report.Results, Result{Rule: FaultChecks, Name: "the rest of the run",
			Skipped: "not run: the run reached its cap on requests to the cloud (-max-requests)"})
	}
	return true
}

// judged records the clean call c, judged by the rules, as a check of
// rule: a pass, or a failure of the rule it broke.
func (r *runner) judged(rule, name string, c *callCase) bool {
	v := judge(c)
	if !v.accepted() {
		rule = v.rule
	}
	return r.check(rule, name, v.message(), c.outcome)
}

// underFaults runs call once per fault and per request of its clean run,
// injecting the fault into that request, and records one check per fault:
// a pass, or the first rule a faulted call broke, judged as about with its
// outcome and fault. Calls whose fault was not injected (a truncated empty
// body) are not judged. after, if set, runs clean after each faulted call,
// with what that call left in the cloud and in shared state: to bring the
// cloud back to the state call expects, or to check what the faulted call
// kept. If it reports false, the run stops.
func (r *runner) underFaults(name string, clean *outcome, call func() *outcome, after func(f Fault, request int) bool, about callCase) {
	n := len(clean.trace)
	if n == 0 {
		return
	}
	for _, f := range Faults {
		var failed bool
		for k := 0; k < n && !failed; k++ {
			r.ic.Arm(f, k)
			o := call()
			o.injected = r.ic.Disarm()
			if after != nil && !after(f, k) {
				return
			}
			if !o.injected {
				continue
			}
			c := about
			c.outcome, c.fault = o, f
			if v := judge(&c); !v.accepted() {
				r.check(v.rule, fmt.Sprintf("%s under %s (request %d of %d)", name, f, k+1, n), v.message(), o)
				failed = true
			}
		}
		if !failed {
			r.pass(FaultChecks, fmt.Sprintf("%s under %s", name, f))
		}
	}
}

// healthyFailure explains a call that failed against a healthy cloud, ""
// when it did not fail.
func healthyFailure(o *outcome, what string) string {
	if o.ok() {
		return ""
	}
	return what + " failed against a healthy cloud"
}

// notImplemented fails the capability check when a method of an exported
// capability answers NotImplemented, and tells the caller to stop.
func (r *runner) notImplemented(o *outcome, c abi.Capability) bool {
	if o.status != abi.StatusNotImplemented {
		return false
	}
	r.check(RuleCapabilities, string(c)+" is implemented",
		fmt.Sprintf("%s answered NotImplemented, but the module exports %s, so the CCM relies on it; remove the capability's export or implement it", o.method, c), o)
	return true
}

func newOwned() abi.Message     { return &abi.OwnedLoadBalancers{} }
func newBool() abi.Message      { return new(abi.Bool) }
func newString() abi.Message    { return new(abi.String) }
func newZone() abi.Message      { return &abi.Zone{} }
func newRoutes() abi.Message    { return &abi.Routes{} }
func newMetadata() abi.Message  { return &abi.InstanceMetadata{} }
func newGetResult() abi.Message { return &abi.GetLoadBalancerResult{} }
func newStatus() abi.Message    { return &abi.LoadBalancerStatus{} }
