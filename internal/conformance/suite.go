// Package conformance checks a provider module against the rules that keep
// clusters safe, by running it in the real host against the author's cloud
// (or a fake of it) and injecting faults into its HTTP requests in the
// host's HTTP layer: 5xx, 429 with Retry-After, connection reset, timeout,
// truncated body and 401, one request at a time. The module cannot tell an
// injected fault from the cloud's own, so what it answers is what it would
// answer in production.
//
// The rules are the constants Rule*; every failure names its rule and the
// exact requests and answers of the call that broke it.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// Options is one run.
type Options struct {
	// Name labels the module in the report, e.g. its file name.
	Name string
	Wasm []byte
	// Host is the module's configuration as the CCM would run it, from the
	// cloud-config. The suite adds its hooks and runs one instance, so the
	// module's requests are seen in order.
	Host host.Config
	Spec *Spec
	// Secrets are the values of the Secret keys the module's credentials
	// name, searched for in its logs, errors, results and request URLs.
	Secrets []string
}

// Run runs every check. An error means the module could not be run at all.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	r := &runner{ctx: ctx, spec: opts.Spec, ic: NewInterceptor(opts.Secrets), secrets: opts.Secrets,
		report: &Report{Module: opts.Name, secrets: opts.Secrets}}
	if r.spec == nil {
		r.spec = &Spec{}
	}
	info, problems := host.Validate(ctx, opts.Wasm)
	caps := make([]string, len(info.Capabilities))
	for i, c := range info.Capabilities {
		caps[i] = string(c)
	}
	if len(problems) > 0 {
		r.fail(RuleCapabilities, "module validates", "the module does not validate:\n- "+strings.Join(problems, "\n- "), nil)
		r.report.Duration = time.Since(start)
		return r.report, nil
	}
	r.pass(RuleCapabilities, "module validates: exports "+strings.Join(caps, ", "))

	cfg := opts.Host
	cfg.PoolSize = 1
	cfg.HTTP.Wrap = r.ic.Wrap
	cfg.Log = r.logLine
	mod, err := host.New(ctx, opts.Wasm, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the module: %w", err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	r.mod = mod

	if info.Supports(abi.CapabilityInstancesV2) {
		r.instances()
	} else {
		r.skip(RuleInstances, "InstancesV2", "the module does not export InstancesV2")
	}
	if !info.Supports(abi.CapabilityLoadBalancer) {
		r.skip(RuleLBLifecycle, "LoadBalancer", "the module does not export LoadBalancer")
	} else if r.spec.LoadBalancer.Skip {
		r.skip(RuleLBLifecycle, "LoadBalancer", "loadBalancer.skip is set in the test spec")
	} else {
		r.loadBalancer()
	}
	r.leaks()
	if read := mod.RawCredentialReads(); len(read) > 0 {
		r.pass(RuleRawCredentials, "read raw (credentials.readable, which weakens isolation): "+strings.Join(read, ", "))
	} else {
		r.pass(RuleRawCredentials, "no credential read raw")
	}
	r.report.Duration = time.Since(start)
	return r.report, nil
}

type runner struct {
	ctx     context.Context
	mod     *host.Module
	spec    *Spec
	ic      *Interceptor
	secrets []string
	report  *Report

	mu         sync.Mutex
	leakedLogs []string
	// texts are the module's errors and results, searched for secrets.
	texts []text
}

type text struct{ where, s string }

// logLine keeps the module's log lines that hold a credential; a module
// that floods its log cannot make the run hold every line.
func (r *runner) logLine(level abi.LogLevel, msg string) {
	if !r.holdsSecret(msg) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leakedLogs = append(r.leakedLogs, "log line "+level.String()+": "+msg)
}

func (r *runner) holdsSecret(s string) bool {
	return slices.ContainsFunc(r.secrets, func(secret string) bool { return secret != "" && strings.Contains(s, secret) })
}

func (r *runner) pass(rule, name string) {
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name})
}

func (r *runner) skip(rule, name, why string) {
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Skipped: why})
}

func (r *runner) fail(rule, name, why string, trace []Exchange) {
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Failure: why, Trace: trace})
}

// check records the call o as a pass or, when why is not "", a failure.
func (r *runner) check(rule, name, why string, o *outcome) {
	if why == "" {
		r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Duration: o.elapsed})
		return
	}
	r.report.Results = append(r.report.Results, Result{Rule: rule, Name: name, Failure: why + "\nmodule answered: " + o.String(),
		Trace: o.trace, Duration: o.elapsed})
}

// outcome is what one module call answered and the requests it made.
type outcome struct {
	method   string // its name, e.g. InstanceExists
	out      abi.Message
	status   abi.Status
	after    time.Duration
	err      error
	trace    []Exchange
	elapsed  time.Duration
	injected bool // a fault was injected into one of its requests
}

func (o *outcome) ok() bool { return o.err == nil }

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

// creates returns the create-like requests of the call: POSTs to a
// collection, that is to a path under which the run has addressed other
// objects (POST /v1/lbs, GET /v1/lbs/lb-1), which is how REST APIs create.
// A POST to an object or its actions (POST /v1/lbs/4/actions/update) is an
// update.
func (r *runner) creates(o *outcome) []string {
	var seen []string
	for _, ex := range r.ic.Since(0) {
		seen = append(seen, urlPath(ex.URL))
	}
	var creates []string
	for _, ex := range o.trace {
		if ex.Method != "POST" {
			continue
		}
		p := urlPath(ex.URL)
		if slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, p+"/") }) {
			creates = append(creates, "POST "+p)
		}
	}
	return creates
}

func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.TrimSuffix(u.Path, "/")
}

// call runs one export from empty shared state, so that it reaches the
// cloud and its requests can be faulted; warmCall keeps what earlier calls
// left.
func (r *runner) call(export string, in abi.Message, out func() abi.Message) *outcome {
	r.mod.ClearState()
	return r.warmCall(export, in, out)
}

func (r *runner) warmCall(export string, in abi.Message, out func() abi.Message) *outcome {
	o := &outcome{method: export}
	if m, ok := abi.LookupMethod(export); ok {
		o.method = m.Name
	}
	if out != nil {
		o.out = out()
	}
	mark, start := r.ic.Mark(), time.Now()
	o.err = r.mod.Call(r.ctx, export, in, o.out)
	o.elapsed, o.trace = time.Since(start), r.ic.Since(mark)
	var se *host.StatusError
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

// underFaults runs call once per fault and per request of its clean run,
// injecting the fault into that request, and records one check per fault
// with every violation judge finds. Calls whose fault was not injected (a
// truncated empty body) are not judged. restore, if set, runs clean after
// each faulted call to bring the cloud back to the state call expects; if
// it fails, the run stops.
func (r *runner) underFaults(name string, clean *outcome, call func() *outcome, restore func() bool, judge func(f Fault, o *outcome) (rule, why string)) {
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
			if restore != nil && !restore() {
				return
			}
			if !o.injected {
				continue
			}
			if rule, why := judge(f, o); why != "" {
				r.check(rule, fmt.Sprintf("%s under %s (request %d of %d)", name, f, k+1, n), why, o)
				failed = true
			}
		}
		if !failed {
			r.pass(FaultChecks, fmt.Sprintf("%s under %s", name, f))
		}
	}
}

// retryRule is the judgement every call shares: an error after an injected
// 429 must be RetryAfter.
func retryRule(f Fault, o *outcome) (string, string) {
	if f == Fault429 && !o.ok() && o.status != abi.StatusRetryAfter {
		return RuleRetryAfter, fmt.Sprintf("the cloud answered 429 with Retry-After: %d, and the module answered %s instead of RetryAfter", injectedRetryAfter, o.status)
	}
	return "", ""
}

func (r *runner) instances() {
	if len(r.spec.Nodes) == 0 {
		r.skip(RuleInstances, "InstancesV2", "the test spec lists no nodes")
		return
	}
	for _, sn := range r.spec.Nodes {
		node := sn.node()
		exists := func() *outcome { return r.call(abi.ExportInstanceExists, &node, newBool) }
		meta := func() *outcome { return r.call(abi.ExportInstanceMetadata, &node, newMetadata) }
		shutdown := func() *outcome { return r.call(abi.ExportInstanceShutdown, &node, newBool) }
		label := fmt.Sprintf("(%s)", sn.Name)

		e := exists()
		if r.notImplemented(e, abi.CapabilityInstancesV2) {
			return
		}
		var why string
		switch {
		case !e.ok():
			why = "InstanceExists failed against a healthy cloud"
		case bool(*e.out.(*abi.Bool)) != sn.Exists:
			why = fmt.Sprintf("InstanceExists answered %v; the test spec says exists: %v", *e.out.(*abi.Bool), sn.Exists)
		}
		r.check(RuleInstances, "InstanceExists"+label, why, e)
		if !sn.Exists {
			// What the call above kept (a snapshot, say) must not be
			// enough to call the instance gone.
			again := r.warmCall(abi.ExportInstanceExists, &node, newBool)
			why := ""
			if again.ok() && !bool(*again.out.(*abi.Bool)) && len(again.trace) == 0 {
				why = "InstanceExists answered false without asking the cloud in that call: an answer that deletes the Node must come from the cloud's own answer, not from what the module kept"
			}
			r.check(RuleGoneConfirmed, "InstanceExists again with kept state"+label, why, again)
		}

		m := meta()
		r.check(RuleInstances, "InstanceMetadata"+label, sn.judgeMetadata(m), m)

		s := shutdown()
		r.underFaults("InstanceExists"+label, e, exists, nil, func(f Fault, o *outcome) (string, string) {
			if o.ok() && !bool(*o.out.(*abi.Bool)) {
				return RuleNeverGoneOnDoubt, "InstanceExists answered false, which deletes the Node, though the cloud never said the instance is gone"
			}
			return retryRule(f, o)
		})
		notFound := func(method string) func(Fault, *outcome) (string, string) {
			return func(f Fault, o *outcome) (string, string) {
				if o.status == abi.StatusNotFound {
					return RuleNeverGoneOnDoubt, method + " answered NotFound (\"instance not found\") though the cloud never said the instance is gone"
				}
				return retryRule(f, o)
			}
		}
		r.underFaults("InstanceMetadata"+label, m, meta, nil, notFound("InstanceMetadata"))
		r.underFaults("InstanceShutdown"+label, s, shutdown, nil, notFound("InstanceShutdown"))
	}
}

// judgeMetadata compares a clean InstanceMetadata with the spec.
func (sn SpecNode) judgeMetadata(o *outcome) string {
	if !sn.Exists {
		if o.status != abi.StatusNotFound {
			return "InstanceMetadata of an instance that does not exist must answer NotFound"
		}
		return ""
	}
	if !o.ok() {
		return "InstanceMetadata failed against a healthy cloud"
	}
	m := o.out.(*abi.InstanceMetadata)
	var diffs []string
	want := func(field, got, want string) {
		if want != "" && got != want {
			diffs = append(diffs, fmt.Sprintf("%s is %q, the test spec says %q", field, got, want))
		}
	}
	want("providerID", m.ProviderID, sn.ProviderID)
	want("instanceType", m.InstanceType, sn.InstanceType)
	want("zone", m.Zone, sn.Zone)
	want("region", m.Region, sn.Region)
	if m.ProviderID == "" {
		diffs = append(diffs, "providerID is empty")
	}
	return strings.Join(diffs, "; ")
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

func (r *runner) loadBalancer() {
	svc := r.spec.service()
	nodes := r.spec.targets()
	req := func(nodes []abi.Node) *abi.LoadBalancerRequest {
		return &abi.LoadBalancerRequest{ClusterName: "kubernetes", Service: svc, Nodes: nodes}
	}
	get := func() *outcome { return r.call(abi.ExportGetLoadBalancer, req(nil), newGetResult) }
	ensure := func() *outcome { return r.call(abi.ExportEnsureLoadBalancer, req(nodes), newStatus) }
	update := func() *outcome { return r.call(abi.ExportUpdateLoadBalancer, req(nodes[:max(len(nodes)-1, 0)]), nil) }
	del := func() *outcome { return r.call(abi.ExportEnsureLoadBalancerDeleted, req(nil), nil) }
	const rule = RuleLBLifecycle
	step := func(name string, o *outcome, why string) bool {
		r.check(rule, name, why, o)
		return why == ""
	}
	failed := func(o *outcome, what string) string {
		if o.ok() {
			return ""
		}
		return what + " failed against a healthy cloud"
	}

	// Whatever happens, leave no test load balancer behind.
	defer func() {
		if o := del(); !o.ok() {
			r.check(rule, "EnsureLoadBalancerDeleted at the end", "EnsureLoadBalancerDeleted failed against a healthy cloud; the test load balancer may be left", o)
		}
	}()

	// Delete what an interrupted run may have left, then the lifecycle.
	o := del()
	if r.notImplemented(o, abi.CapabilityLoadBalancer) || !step("EnsureLoadBalancerDeleted before the test", o, failed(o, "EnsureLoadBalancerDeleted")) {
		return
	}
	o = get()
	if !step("GetLoadBalancer before create: not exists", o, lbExists(o, false)) {
		return
	}
	created := ensure()
	if !step("EnsureLoadBalancer creates", created, failed(created, "EnsureLoadBalancer")+noIngress(created)) {
		return
	}
	status := created.out.(*abi.LoadBalancerStatus)
	o = get()
	why := lbExists(o, true)
	if why == "" && !sameStatus(&o.out.(*abi.GetLoadBalancerResult).Status, status) {
		why = "GetLoadBalancer answered another status than EnsureLoadBalancer"
	}
	step("GetLoadBalancer after ensure: exists, same status", o, why)
	again := ensure()
	why = failed(again, "EnsureLoadBalancer of an existing load balancer")
	switch {
	case why != "":
	case len(r.creates(again)) > 0:
		why = fmt.Sprintf("EnsureLoadBalancer of an existing load balancer sent create-like requests (%s): a duplicate", strings.Join(r.creates(again), ", "))
	case !sameStatus(again.out.(*abi.LoadBalancerStatus), status):
		why = "EnsureLoadBalancer of an existing load balancer answered another status"
	}
	r.check(RuleLBIdempotent, "EnsureLoadBalancer again: same status, nothing created", why, again)

	r.underFaults("GetLoadBalancer", o, get, nil, func(f Fault, o *outcome) (string, string) {
		if o.ok() && !o.out.(*abi.GetLoadBalancerResult).Exists {
			return RuleNeverGoneOnDoubt, "GetLoadBalancer answered exists=false for a load balancer that exists"
		}
		return retryRule(f, o)
	})
	r.underFaults("EnsureLoadBalancer", again, ensure, nil, func(f Fault, o *outcome) (string, string) {
		if creates := r.creates(o); len(creates) > 0 {
			return RuleLBIdempotent, "EnsureLoadBalancer of an existing load balancer sent create-like requests under a fault (" + strings.Join(creates, ", ") + "): a duplicate"
		}
		return retryRule(f, o)
	})

	o = update()
	if !step("UpdateLoadBalancer with one target less", o, failed(o, "UpdateLoadBalancer")) {
		return
	}
	r.underFaults("UpdateLoadBalancer", o, update, nil, retryRule)

	cleanDelete := del()
	if !step("EnsureLoadBalancerDeleted", cleanDelete, failed(cleanDelete, "EnsureLoadBalancerDeleted")) {
		return
	}
	o = get()
	step("GetLoadBalancer after delete: not exists", o, lbExists(o, false))
	o = del()
	step("EnsureLoadBalancerDeleted again: success", o, failed(o, "EnsureLoadBalancerDeleted of a deleted load balancer"))

	// Deletion under faults, re-creating the load balancer after each.
	restore := func() bool {
		if o := ensure(); !o.ok() {
			r.check(rule, "EnsureLoadBalancer to re-create after a faulted delete", "EnsureLoadBalancer failed against a healthy cloud", o)
			return false
		}
		return true
	}
	if !restore() {
		return
	}
	r.underFaults("EnsureLoadBalancerDeleted", cleanDelete, del, restore, func(f Fault, o *outcome) (string, string) {
		for _, ex := range o.trace {
			if o.ok() && ex.Method == "DELETE" && ex.Injected != "" && ex.Injected != FaultTruncated {
				return RuleLBDeleteConfirmed, "EnsureLoadBalancerDeleted reported success though its DELETE failed: the load balancer may still exist and the Service's finalizer would be removed"
			}
		}
		return retryRule(f, o)
	})
}

// leaks searches everything the module said for the credential values.
func (r *runner) leaks() {
	if len(r.secrets) == 0 {
		r.skip(RuleNoCredentialLeak, "credentials stay secret", "the module's credentials name no secret")
		return
	}
	check := func(name string, found []string) {
		if len(found) == 0 {
			r.pass(RuleNoCredentialLeak, name)
			return
		}
		r.fail(RuleNoCredentialLeak, name, fmt.Sprintf("a credential value appears in %d place(s), first: %s", len(found), Redact(found[0], r.secrets)), nil)
	}
	r.mu.Lock()
	check("no credential in the module's log", r.leakedLogs)
	r.mu.Unlock()
	var inAnswers []string
	for _, t := range r.texts {
		if r.holdsSecret(t.s) {
			inAnswers = append(inAnswers, t.where+": "+t.s)
		}
	}
	check("no credential in errors or results", inAnswers)
	var inURLs []string
	for _, ex := range r.ic.Since(0) {
		if ex.secretInURL {
			inURLs = append(inURLs, "request "+ex.String())
		}
	}
	check("no credential in request URLs", inURLs)
}

func newBool() abi.Message      { return new(abi.Bool) }
func newMetadata() abi.Message  { return &abi.InstanceMetadata{} }
func newGetResult() abi.Message { return &abi.GetLoadBalancerResult{} }
func newStatus() abi.Message    { return &abi.LoadBalancerStatus{} }

func lbExists(o *outcome, want bool) string {
	if !o.ok() {
		return "GetLoadBalancer failed against a healthy cloud"
	}
	if got := o.out.(*abi.GetLoadBalancerResult).Exists; got != want {
		return fmt.Sprintf("GetLoadBalancer answered exists=%v, want %v", got, want)
	}
	return ""
}

func noIngress(o *outcome) string {
	if o.ok() && len(o.out.(*abi.LoadBalancerStatus).Ingress) == 0 {
		return "EnsureLoadBalancer answered a status without ingress"
	}
	return ""
}

func sameStatus(a, b *abi.LoadBalancerStatus) bool {
	return slices.Equal(a.Ingress, b.Ingress)
}
