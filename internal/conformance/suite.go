// Package conformance checks a provider module against the rules that keep
// clusters safe, by running it in the real host against the author's cloud
// (or a fake of it) and injecting faults into its HTTP requests in the
// host's HTTP layer: 5xx, 429 with Retry-After, connection reset, timeout,
// truncated body, 401, 403 and 400, one request at a time, the second and
// later requests of a call (page 2 of a listing) too. The module cannot
// tell an injected fault from the cloud's own, so what it answers is what
// it would answer in production.
//
// Every answer on which an upstream controller deletes, taints or gives up
// something is checked under every fault: InstanceExists false, NotFound
// from InstanceMetadata, InstanceShutdown, InstanceID and
// GetZoneByProviderID, InstanceShutdown true, GetLoadBalancer exists=false,
// a create by EnsureLoadBalancer of one that exists, ListRoutes missing or
// blackholing a route, and the success of EnsureLoadBalancerDeleted and
// DeleteRoute, which must rest on the cloud's own 2xx or 404 to a
// destroying request as the interceptor saw it.
//
// Every checked call starts from empty shared state, so that it reaches
// the cloud and can be faulted. The warm phase (warm.go) then measures what
// the module costs as the CCM runs it: the controllers' calls of a cluster
// at rest, state kept, counted per call kind and endpoint.
//
// Requests reach the cloud at Options.Rate; the cloud's own 429s are
// waited out and reported, never scored against the module.
//
// The rules are the constants Rule*; every failure names its rule and the
// exact requests and answers of the call that broke it, bodies included.
package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
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
	// name, searched for in its logs, errors, results and request URLs,
	// and redacted from the report; those of the spec's limited
	// credentials too.
	Secrets []string
	// Rate paces the requests sent to the cloud, per second; 0 sends them
	// at once. The cloud's own 429s are waited out whatever the rate.
	Rate float64
}

// Run runs every check. An error means the module could not be run at all.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	r := &runner{ctx: ctx, spec: opts.Spec, wasm: opts.Wasm, cluster: cmp.Or(opts.Host.ClusterName, "kubernetes"), ic: NewInterceptor(opts.Secrets), secrets: opts.Secrets,
		report: &Report{Module: opts.Name, secrets: opts.Secrets}}
	r.ic.SetRate(opts.Rate)
	defer func() { r.report.Throttled = r.ic.Throttled() }()
	if r.spec == nil {
		r.spec = &Spec{}
	}
	info, problems := host.Validate(ctx, opts.Wasm)
	if len(problems) > 0 {
		r.fail(RuleCapabilities, "module validates", "the module does not validate:\n- "+strings.Join(problems, "\n- "), nil)
		r.report.Duration = time.Since(start)
		return r.report, nil
	}
	caps, optional := Exports(info)
	r.pass(RuleCapabilities, "module validates: capabilities "+caps+"; optional exports "+optional)

	cfg := opts.Host
	cfg.ClusterName = r.cluster
	cfg.PoolSize = 1
	cfg.HTTP.Wrap = r.ic.Wrap
	cfg.Log = r.logLine
	mod, err := host.New(ctx, opts.Wasm, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the module: %w", err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	r.mod, r.info, r.cfg = mod, info, cfg
	if lc := r.spec.LimitedCredentials; lc != nil {
		limited := cfg
		limited.Credentials.Dir = lc.Dir
		if r.limited, err = host.New(ctx, opts.Wasm, limited); err != nil {
			return nil, fmt.Errorf("starting the module with the limited credentials: %w", err)
		}
		defer r.limited.Close(context.WithoutCancel(ctx))
	}

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
		r.loadBalancerList()
	}
	if !info.Supports(abi.CapabilityRoutes) {
		r.skip(RuleRoutes, "Routes", "the module does not export Routes")
	} else if r.spec.Routes.Skip {
		r.skip(RuleRoutes, "Routes", "routes.skip is set in the test spec")
	} else {
		r.routes()
	}
	r.warm(opts.Host.PoolSize)
	if r.limited != nil {
		r.limitedInstances()
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
	ctx  context.Context
	mod  *host.Module
	info host.Info
	// wasm and cfg start the module again, for another cluster.
	wasm []byte
	cfg  host.Config
	// cluster is the cluster name the module runs for: its init's and
	// every call's.
	cluster string
	// limited runs the module with the spec's limited credentials.
	limited *host.Module
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

// check records the call o as a pass or, when why is not "", a failure,
// and reports whether it passed. A failure of a call that saw the cloud's
// own 429 is not the module's: it is recorded as skipped, with why.
func (r *runner) check(rule, name, why string, o *outcome) bool {
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

// cloudThrottled reports whether the cloud itself answered 429 to one of
// the call's requests and the module saw it.
func (o *outcome) cloudThrottled() bool {
	return slices.ContainsFunc(o.trace, func(ex Exchange) bool { return ex.CloudThrottled })
}

// destroys reports whether ex asks the cloud to destroy something: a
// DELETE, or a POST to an action whose name says delete or remove
// (POST /networks/4/actions/delete_route).
func destroys(ex Exchange) bool {
	if ex.Method == "DELETE" {
		return true
	}
	if ex.Method != "POST" {
		return false
	}
	p := urlPath(ex.URL)
	last := strings.ToLower(p[strings.LastIndex(p, "/")+1:])
	return strings.Contains(last, "delete") || strings.Contains(last, "remove")
}

// confirmedDestroyed reports whether the cloud itself, not the suite,
// answered one of the call's destroying requests with success (a 2xx,
// whose body the suite may have cut: the cloud acted), or said the object
// was already gone (404 or 410).
func (o *outcome) confirmedDestroyed() bool {
	return slices.ContainsFunc(o.trace, func(ex Exchange) bool {
		if !destroys(ex) || ex.Err != "" || ex.Injected != "" && ex.Injected != FaultTruncated {
			return false
		}
		return ex.Status/100 == 2 || ex.Status == 404 || ex.Status == 410
	})
}

// deleteJudge: a delete that answers success under a fault must have the
// cloud's word for it.
func deleteJudge(rule, method, consequence string) func(Fault, *outcome) (string, string) {
	return func(f Fault, o *outcome) (string, string) {
		if o.ok() && !o.confirmedDestroyed() {
			return rule, method + " reported success, though the cloud never confirmed a delete (no 2xx or 404 of its own to a DELETE or delete action): " + consequence
		}
		return retryRule(f, o)
	}
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
	o := &outcome{method: methodName(export)}
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
// truncated empty body) are not judged. after, if set, runs clean after
// each faulted call, with what that call left in the cloud and in shared
// state: to bring the cloud back to the state call expects, or to check
// what the faulted call kept. If it reports false, the run stops.
func (r *runner) underFaults(name string, clean *outcome, call func() *outcome, after func(f Fault, request int) bool, judge func(f Fault, o *outcome) (rule, why string)) {
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
		if !r.instanceChecks(sn, sn.node(), "("+sn.Name+")") {
			return
		}
		if sn.LookupByName && sn.ProviderID != "" {
			// A brand-new Node has no provider ID yet: the module must
			// find its instance by the Node's name.
			byName := sn.node()
			byName.ProviderID = ""
			if !r.instanceChecks(sn, byName, "("+sn.Name+" by name)") {
				return
			}
		}
	}
}

// instanceChecks checks InstanceExists, InstanceMetadata and
// InstanceShutdown of one Node, clean and under every fault. It reports
// false when the module does not implement them.
func (r *runner) instanceChecks(sn SpecNode, node abi.Node, label string) bool {
	exists := func() *outcome { return r.call(abi.ExportInstanceExists, &node, newBool) }
	meta := func() *outcome { return r.call(abi.ExportInstanceMetadata, &node, newMetadata) }
	shutdown := func() *outcome { return r.call(abi.ExportInstanceShutdown, &node, newBool) }

	e := exists()
	if r.notImplemented(e, abi.CapabilityInstancesV2) {
		return false
	}
	var why string
	switch {
	case sn.ExpectError != "":
		why = sn.judgeError(e)
	case !e.ok():
		why = "InstanceExists failed against a healthy cloud"
	case bool(*e.out.(*abi.Bool)) != sn.Exists:
		why = fmt.Sprintf("InstanceExists answered %v; the test spec says exists: %v", *e.out.(*abi.Bool), sn.Exists)
	}
	r.check(RuleInstances, "InstanceExists"+label, why, e)
	if !sn.Exists && sn.ExpectError == "" {
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
	r.check(RuleInstances, "InstanceShutdown"+label, sn.judgeShutdown(s), s)

	ids := instanceIDs(node)
	var keptCheck func(Fault, int) bool
	if sn.Exists && sn.ExpectError == "" {
		keptCheck = r.keptAfterFault("InstanceExists"+label, len(e.trace), func() *outcome {
			return r.warmCall(abi.ExportInstanceExists, &node, newBool)
		})
	}
	r.underFaults("InstanceExists"+label, e, exists, keptCheck, existsJudge("InstanceExists", ids))
	r.underFaults("InstanceMetadata"+label, m, meta, nil, notFoundJudge("InstanceMetadata", ids))
	r.underFaults("InstanceShutdown"+label, s, shutdown, nil, shutdownJudge("InstanceShutdown", s, ids))

	if node.ProviderID != "" && r.info.Supports(abi.CapabilityZones) {
		pid := abi.String(node.ProviderID)
		zone := func() *outcome { return r.call(abi.ExportGetZoneByProviderID, &pid, newZone) }
		z := zone()
		r.check(RuleInstances, "GetZoneByProviderID"+label, sn.judgeZone(z), z)
		r.underFaults("GetZoneByProviderID"+label, z, zone, nil, notFoundJudge("GetZoneByProviderID", ids))
	}
	if r.info.Supports(abi.CapabilityInstances) {
		r.legacyInstanceChecks(sn, node, label)
	}
	return true
}

// legacyInstanceChecks checks the Instances (v1) methods whose answers
// delete or taint a Node, under every fault.
func (r *runner) legacyInstanceChecks(sn SpecNode, node abi.Node, label string) {
	ids := instanceIDs(node)
	if node.ProviderID != "" {
		pid := abi.String(node.ProviderID)
		exists := func() *outcome { return r.call(abi.ExportInstanceExistsByProviderID, &pid, newBool) }
		shutdown := func() *outcome { return r.call(abi.ExportInstanceShutdownByProviderID, &pid, newBool) }
		e, s := exists(), shutdown()
		r.underFaults("InstanceExistsByProviderID"+label, e, exists, nil, existsJudge("InstanceExistsByProviderID", ids))
		r.underFaults("InstanceShutdownByProviderID"+label, s, shutdown, nil, shutdownJudge("InstanceShutdownByProviderID", s, ids))
	}
	name := abi.String(node.Name)
	id := func() *outcome { return r.call(abi.ExportInstanceID, &name, newString) }
	o := id()
	if o.status == abi.StatusNotImplemented {
		return
	}
	r.underFaults("InstanceID"+label, o, id, nil, notFoundJudge("InstanceID", ids))
}

// keptAfterFault returns the check underFaults runs after each faulted
// InstanceExists of an instance that exists: the call again, clean, with
// what the faulted call kept in shared state. A listing that failed
// part-way and was kept as if complete lacks instances that exist; an
// answer of false from it deletes their Nodes. It records one failure per
// fault, or one pass once the last fault's calls are done.
func (r *runner) keptAfterFault(name string, requests int, again func() *outcome) func(Fault, int) bool {
	failed := map[Fault]bool{}
	return func(f Fault, k int) bool {
		if !failed[f] {
			if o := again(); o.ok() && !bool(*o.out.(*abi.Bool)) {
				failed[f] = true
				r.check(RuleGoneConfirmed, fmt.Sprintf("%s clean, after a call under %s (request %d of %d) kept its state", name, f, k+1, requests),
					"InstanceExists answered false for an instance that exists, from what the faulted call before it kept: a listing that failed part-way must not be kept as if complete, and an answer that deletes the Node must come from the cloud's own answer in that call", o)
			}
		}
		if f == Faults[len(Faults)-1] && k == requests-1 && len(failed) == 0 {
			r.pass(RuleGoneConfirmed, name+" clean, after each faulted call, with what it kept")
		}
		return true
	}
}

// existsJudge: under a fault, never false (the Node is deleted) without
// the cloud's own word that the instance is gone.
func existsJudge(method string, ids []string) func(Fault, *outcome) (string, string) {
	return func(f Fault, o *outcome) (string, string) {
		if o.ok() && !bool(*o.out.(*abi.Bool)) {
			if why := goneUnconfirmed(o, ids); why != "" {
				return RuleNeverGoneOnDoubt, method + " answered false, which deletes the Node. " + why
			}
		}
		return retryRule(f, o)
	}
}

// notFoundJudge: under a fault, never NotFound (cloudprovider.InstanceNotFound,
// on which the node lifecycle controller deletes the Node) without the
// cloud's own word that the instance is gone.
func notFoundJudge(method string, ids []string) func(Fault, *outcome) (string, string) {
	return func(f Fault, o *outcome) (string, string) {
		if o.status == abi.StatusNotFound {
			if why := goneUnconfirmed(o, ids); why != "" {
				return RuleNeverGoneOnDoubt, method + " answered NotFound (\"instance not found\"), on which the Node is deleted. " + why
			}
		}
		return retryRule(f, o)
	}
}

// shutdownJudge: under a fault, never NotFound without the cloud's word,
// and never shut down when the clean call said running (the Node is
// tainted and its pods evicted).
func shutdownJudge(method string, clean *outcome, ids []string) func(Fault, *outcome) (string, string) {
	running := clean.ok() && !bool(*clean.out.(*abi.Bool))
	return func(f Fault, o *outcome) (string, string) {
		if rule, why := notFoundJudge(method, ids)(f, o); rule == RuleNeverGoneOnDoubt {
			return rule, why
		}
		if running && o.ok() && bool(*o.out.(*abi.Bool)) {
			return RuleNeverShutdownOnDoubt, method + " answered true, which taints the Node as shut down, though the cloud said the instance is running"
		}
		return retryRule(f, o)
	}
}

// instanceIDs are what names a Node's instance in a request: the Node's
// name, its provider ID and the provider ID's last part (i-0001 of
// aws:///us-east-1a/i-0001).
func instanceIDs(node abi.Node) []string {
	ids := []string{node.Name}
	if pid := node.ProviderID; pid != "" {
		ids = append(ids, pid)
		if last := pid[strings.LastIndex(pid, "/")+1:]; last != "" && last != pid {
			ids = append(ids, last)
		}
	}
	return ids
}

// names reports whether the request ex names one of ids, as a segment of
// its path or a value of its query.
func names(ex Exchange, ids []string) bool {
	u, err := url.Parse(ex.URL)
	if err != nil {
		return false
	}
	parts := strings.Split(u.Path, "/")
	for _, vs := range u.Query() {
		parts = append(parts, vs...)
	}
	return slices.ContainsFunc(parts, func(p string) bool { return p != "" && slices.Contains(ids, p) })
}

// cloudSaidGone reports whether the cloud itself, not the suite, answered
// ex with 404 or 410: its word that what ex asked for is gone. The suite
// never injects either.
func cloudSaidGone(ex Exchange) bool {
	return ex.Err == "" && ex.Injected == "" && (ex.Status == 404 || ex.Status == 410)
}

// goneUnconfirmed judges an answer that says the object named by ids is
// gone, by the rule the docs give: it must rest on the cloud's own 404 or
// 410 to a request for that object in the same call. It returns "" when
// the call has that evidence, else the rule and the evidence the suite
// saw, for the failure message.
func goneUnconfirmed(o *outcome, ids []string) string {
	var other []string
	for _, ex := range o.trace {
		if !cloudSaidGone(ex) {
			continue
		}
		if names(ex, ids) {
			return ""
		}
		other = append(other, fmt.Sprintf("%d to %s %s", ex.Status, ex.Method, ex.URL))
	}
	why := "Rule: an answer of \"gone\" needs the cloud's own 404 or 410, in the same call, to a request naming it (" + strings.Join(ids, ", ") + "). Seen: "
	if len(other) == 0 {
		why += "the cloud answered no request of the call with 404 or 410"
	} else {
		why += "the cloud's " + strings.Join(other, "; ") + ", which name none of these"
	}
	for i, ex := range o.trace {
		if ex.Injected != "" {
			why += fmt.Sprintf("; the suite injected %s into request %d", ex.Injected, i+1)
		}
	}
	return why
}

// judgeError compares a call of a Node with expectError with the spec.
func (sn SpecNode) judgeError(o *outcome) string {
	if o.status.String() != sn.ExpectError {
		return fmt.Sprintf("%s answered %s; the test spec says expectError: %s", o.method, o.status, sn.ExpectError)
	}
	return ""
}

// judgeShutdown compares a clean InstanceShutdown with the spec.
func (sn SpecNode) judgeShutdown(o *outcome) string {
	switch {
	case sn.ExpectError != "":
		return sn.judgeError(o)
	case !sn.Exists:
		if o.ok() && bool(*o.out.(*abi.Bool)) {
			return "InstanceShutdown answered true for an instance that does not exist"
		}
		return ""
	case !o.ok():
		return "InstanceShutdown failed against a healthy cloud"
	case sn.Shutdown != nil && bool(*o.out.(*abi.Bool)) != *sn.Shutdown:
		return fmt.Sprintf("InstanceShutdown answered %v; the test spec says shutdown: %v", *o.out.(*abi.Bool), *sn.Shutdown)
	}
	return ""
}

// judgeZone compares a clean GetZoneByProviderID with the spec.
func (sn SpecNode) judgeZone(o *outcome) string {
	switch {
	case sn.ExpectError != "" || !sn.Exists:
		return ""
	case !o.ok():
		return "GetZoneByProviderID failed against a healthy cloud"
	}
	z := o.out.(*abi.Zone)
	var diffs []string
	if sn.Zone != "" && z.FailureDomain != sn.Zone {
		diffs = append(diffs, fmt.Sprintf("failureDomain is %q, the test spec says zone %q", z.FailureDomain, sn.Zone))
	}
	if sn.Region != "" && z.Region != sn.Region {
		diffs = append(diffs, fmt.Sprintf("region is %q, the test spec says %q", z.Region, sn.Region))
	}
	return strings.Join(diffs, "; ")
}

// judgeMetadata compares a clean InstanceMetadata with the spec.
func (sn SpecNode) judgeMetadata(o *outcome) string {
	if sn.ExpectError != "" {
		return sn.judgeError(o)
	}
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
		return &abi.LoadBalancerRequest{ClusterName: r.cluster, Service: svc, Nodes: nodes}
	}
	get := func() *outcome { return r.call(abi.ExportGetLoadBalancer, req(nil), newGetResult) }
	ensure := func() *outcome { return r.call(abi.ExportEnsureLoadBalancer, req(nodes), newStatus) }
	update := func() *outcome { return r.call(abi.ExportUpdateLoadBalancer, req(nodes[:max(len(nodes)-1, 0)]), nil) }
	del := func() *outcome { return r.call(abi.ExportEnsureLoadBalancerDeleted, req(nil), nil) }
	const rule = RuleLBLifecycle
	step := func(name string, o *outcome, why string) bool {
		return r.check(rule, name, why, o)
	}
	failed := func(o *outcome, what string) string {
		if o.ok() {
			return ""
		}
		return what + " failed against a healthy cloud"
	}

	// Whatever happens, leave no test load balancer behind.
	defer func() {
		if o := del(); !o.ok() && o.status != abi.StatusNotImplemented {
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

	r.underFaults("GetLoadBalancer", o, get, nil, lbGoneJudge(r.lbIDs(svc)))
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
	r.underFaults("EnsureLoadBalancerDeleted", cleanDelete, del, func(Fault, int) bool { return restore() }, deleteJudge(RuleLBDeleteConfirmed, "EnsureLoadBalancerDeleted",
		"the load balancer may still exist and the Service's finalizer would be removed"))
	if r.limited != nil {
		o := r.with(r.limited, del)
		r.check(RuleLimitedCredential, "EnsureLoadBalancerDeleted with the limited credentials",
			verdict(deleteJudge(RuleLimitedCredential, "EnsureLoadBalancerDeleted", "the load balancer may still exist and the Service's finalizer would be removed"), o), o)
	}
}

// lbGoneJudge: under a fault, GetLoadBalancer never answers exists=false
// (the service controller creates another) without the cloud's own word
// that the load balancer, named by ids, is gone.
func lbGoneJudge(ids []string) func(Fault, *outcome) (string, string) {
	return func(f Fault, o *outcome) (string, string) {
		if o.ok() && !o.out.(*abi.GetLoadBalancerResult).Exists {
			if why := goneUnconfirmed(o, ids); why != "" {
				return RuleNeverGoneOnDoubt, "GetLoadBalancer answered exists=false for a load balancer that exists. " + why
			}
		}
		return retryRule(f, o)
	}
}

// lbIDs are what names the Service's load balancer in a request: the name
// GetLoadBalancerName answers for it, and the Service's UID.
func (r *runner) lbIDs(svc abi.Service) []string {
	ids := []string{svc.UID}
	if name := r.lbName(svc); name != "" {
		ids = append(ids, name)
	}
	return ids
}

// lbName is what GetLoadBalancerName answers for svc, "" when it fails.
func (r *runner) lbName(svc abi.Service) string {
	o := r.call(abi.ExportGetLoadBalancerName, &abi.LoadBalancerRequest{ClusterName: r.cluster, Service: svc}, newString)
	if !o.ok() {
		return ""
	}
	return string(*o.out.(*abi.String))
}

// loadBalancerList checks ListLoadBalancers, on which the orphan sweep
// deletes: the suite creates the test load balancer and the spec's seed
// more for this cluster, and one for another cluster, through the module
// itself; lists this cluster's clean and under every fault; deletes one
// and lists again; and deletes them all at the end.
func (r *runner) loadBalancerList() {
	if !r.info.Exports(abi.ExportListLoadBalancers) {
		r.skip(RuleLBListOwn, "ListLoadBalancers", "the module does not export "+abi.ExportListLoadBalancers+" (optional)")
		return
	}
	spec := r.spec.LoadBalancer.List
	test := r.spec.service()
	ours := []abi.Service{test}
	for i := range spec.seed() {
		ours = append(ours, r.spec.serviceNamed(fmt.Sprintf("%s-%d", test.Name, i+1)))
	}
	otherCluster, theirs := spec.OtherCluster.name(), r.spec.serviceNamed(test.Name+"-other-cluster")
	other, err := r.otherClusterModule()
	if err != nil {
		r.fail(RuleLBListOwn, "ListLoadBalancers", "starting the module for cluster "+otherCluster+": "+err.Error(), nil)
		return
	}
	defer other.Close(context.WithoutCancel(r.ctx))

	nodes := r.spec.targets()
	lbCall := func(export, cluster string, svc abi.Service, out func() abi.Message) *outcome {
		return r.call(export, &abi.LoadBalancerRequest{ClusterName: cluster, Service: svc, Nodes: nodes}, out)
	}
	ensure := func(svc abi.Service) *outcome { return lbCall(abi.ExportEnsureLoadBalancer, r.cluster, svc, newStatus) }
	del := func(svc abi.Service) *outcome {
		return lbCall(abi.ExportEnsureLoadBalancerDeleted, r.cluster, svc, nil)
	}
	ensureTheirs := func() *outcome { return lbCall(abi.ExportEnsureLoadBalancer, otherCluster, theirs, newStatus) }
	delTheirs := func() *outcome { return lbCall(abi.ExportEnsureLoadBalancerDeleted, otherCluster, theirs, nil) }
	list := func() *outcome {
		cluster := abi.String(r.cluster)
		return r.call(abi.ExportListLoadBalancers, &cluster, newOwned)
	}
	// healthy records a call that failed against a healthy cloud.
	healthy := func(rule, name string, o *outcome) bool {
		if o.ok() {
			return true
		}
		r.check(rule, name, o.method+" failed against a healthy cloud", o)
		return false
	}

	defer func() {
		for _, svc := range ours {
			healthy(RuleLBLifecycle, "EnsureLoadBalancerDeleted of "+svc.Name+" at the end: the load balancer may be left", del(svc))
		}
		healthy(RuleLBLifecycle, "EnsureLoadBalancerDeleted of "+theirs.Name+" for cluster "+otherCluster+" at the end: the load balancer may be left", r.with(other, delTheirs))
	}()
	for _, svc := range ours {
		if !healthy(RuleLBListConsistent, "EnsureLoadBalancer of "+svc.Name+" to list it", ensure(svc)) {
			return
		}
	}
	if !healthy(RuleLBListOwn, "EnsureLoadBalancer of "+theirs.Name+" for cluster "+otherCluster, r.with(other, ensureTheirs)) {
		return
	}

	l := lbListing{cluster: r.cluster, foreign: map[string]string{}}
	for _, name := range spec.Foreign {
		l.foreign[name] = "the test spec lists as foreign (loadBalancer.list.foreign)"
	}
	made := "EnsureLoadBalancer made for cluster " + otherCluster + " (if your module takes its cluster from its providerConfig, set loadBalancer.list.otherCluster.providerConfig)"
	l.foreign[theirs.UID] = made
	var theirName string
	r.with(other, func() *outcome { theirName = r.lbName(theirs); return nil })
	if theirName != "" {
		l.foreign[theirName] = made
	}
	clean := list()
	if r.notImplemented(clean, abi.CapabilityLoadBalancer) || !healthy(RuleLBListOwn, "ListLoadBalancers", clean) {
		return
	}
	r.check(RuleLBListOwn, fmt.Sprintf("ListLoadBalancers names only cluster %s's", r.cluster), l.notOurs(clean), clean)
	var missing []string
	for _, svc := range ours {
		missing = append(missing, l.unlisted(clean, svc, r.lbName(svc))...)
	}
	r.check(RuleLBListConsistent, fmt.Sprintf("ListLoadBalancers lists the %d load balancers EnsureLoadBalancer made", len(ours)), strings.Join(missing, "; "), clean)
	for _, lb := range *clean.out.(*abi.OwnedLoadBalancers) {
		l.want = append(l.want, lb.Name)
	}
	r.underFaults("ListLoadBalancers", clean, list, nil, l.judge)

	gone := ours[len(ours)-1]
	if !healthy(RuleLBListConsistent, "EnsureLoadBalancerDeleted of "+gone.Name+" to list without it", del(gone)) {
		return
	}
	after := list()
	why := ""
	if !after.ok() {
		why = "ListLoadBalancers failed against a healthy cloud"
	} else if slices.ContainsFunc(*after.out.(*abi.OwnedLoadBalancers), func(lb abi.OwnedLoadBalancer) bool { return lb.ServiceUID == gone.UID }) {
		why = fmt.Sprintf("ListLoadBalancers still lists the load balancer of Service %s/%s (UID %s), which EnsureLoadBalancerDeleted removed", gone.Namespace, gone.Name, gone.UID)
	}
	r.check(RuleLBListConsistent, "ListLoadBalancers after EnsureLoadBalancerDeleted: not listed", why, after)
}

// otherClusterModule starts the module for the spec's other cluster.
func (r *runner) otherClusterModule() (*host.Module, error) {
	oc := r.spec.LoadBalancer.List.OtherCluster
	cfg := r.cfg
	cfg.ClusterName = oc.name()
	if len(oc.ProviderConfig) > 0 {
		cfg.ProviderConfig = oc.ProviderConfig
	}
	return host.New(r.ctx, r.wasm, cfg)
}

// lbListing is what a listing of this cluster's load balancers is judged
// against.
type lbListing struct {
	cluster string
	// foreign maps the names and Service UIDs of load balancers that are
	// not this cluster's to what they are.
	foreign map[string]string
	// want are the names the clean listing had, which a listing under a
	// fault must have too.
	want []string
}

// notOurs explains the first entry of the listing o that is not provably
// this cluster's: the host's sweep would delete it.
func (l lbListing) notOurs(o *outcome) string {
	for _, lb := range *o.out.(*abi.OwnedLoadBalancers) {
		var what string
		switch {
		case lb.ClusterName != "" && lb.ClusterName != l.cluster:
			what = "which it says is cluster " + strconv.Quote(lb.ClusterName) + "'s"
		case l.foreign[lb.Name] != "":
			what = "which " + l.foreign[lb.Name]
		case l.foreign[lb.ServiceUID] != "":
			what = "which " + l.foreign[lb.ServiceUID]
		case lb.Name == "" || lb.ServiceUID == "":
			what = "without its name or its Service's UID, which nothing ties to a Service of this cluster"
		default:
			continue
		}
		return fmt.Sprintf("ListLoadBalancers for cluster %s named load balancer %q (Service UID %q), %s: the orphan sweep would delete it. Rule: list only what carries this cluster's tag and a Service UID",
			l.cluster, lb.Name, lb.ServiceUID, what)
	}
	return ""
}

// unlisted explains why the listing o lacks the load balancer of svc,
// which GetLoadBalancerName calls name; nil when it is listed so.
func (l lbListing) unlisted(o *outcome, svc abi.Service, name string) []string {
	for _, lb := range *o.out.(*abi.OwnedLoadBalancers) {
		if lb.ServiceUID != svc.UID {
			continue
		}
		if name != "" && lb.Name != name {
			return []string{fmt.Sprintf("the load balancer of Service %s/%s is listed as %q, but GetLoadBalancerName answers %q, the name by which the sweep spares a live Service's", svc.Namespace, svc.Name, lb.Name, name)}
		}
		return nil
	}
	return []string{fmt.Sprintf("the load balancer EnsureLoadBalancer made for Service %s/%s (UID %s) is not listed", svc.Namespace, svc.Name, svc.UID)}
}

// judge judges a listing under a fault: an error, or every load balancer
// of the clean listing and none that is not this cluster's.
func (l lbListing) judge(f Fault, o *outcome) (string, string) {
	if !o.ok() {
		return retryRule(f, o)
	}
	if why := l.notOurs(o); why != "" {
		return RuleLBListOwn, why
	}
	listed := *o.out.(*abi.OwnedLoadBalancers)
	var missing []string
	for _, name := range l.want {
		if !slices.ContainsFunc(listed, func(lb abi.OwnedLoadBalancer) bool { return lb.Name == name }) {
			missing = append(missing, strconv.Quote(name))
		}
	}
	if len(missing) > 0 {
		return RuleLBListComplete, fmt.Sprintf("ListLoadBalancers answered %d load balancers, without %s of the %d the clean listing had. Rule: a listing that fails on any page, or ends short, is an error, never a shorter list",
			len(listed), strings.Join(missing, ", "), len(l.want))
	}
	return "", ""
}

// verdict is what judge says of a call made without an injected fault,
// ignoring the 429 rule, which only injected 429s test.
func verdict(judge func(Fault, *outcome) (string, string), o *outcome) string {
	rule, why := judge("", o)
	if rule == RuleRetryAfter {
		return ""
	}
	return why
}

// with runs call with mod in place of the module under test: the module
// started with the limited credentials, or for another cluster.
func (r *runner) with(mod *host.Module, call func() *outcome) *outcome {
	full := r.mod
	r.mod = mod
	defer func() { r.mod = full }()
	return call()
}

// limitedInstances asks about every existing Node with the limited
// credentials: what the cloud refuses must never read as gone or shut
// down.
func (r *runner) limitedInstances() {
	for _, sn := range r.spec.Nodes {
		if !sn.Exists || sn.ExpectError != "" {
			continue
		}
		node := sn.node()
		ids := instanceIDs(node)
		label := " with the limited credentials (" + sn.Name + ")"
		o := r.with(r.limited, func() *outcome { return r.call(abi.ExportInstanceExists, &node, newBool) })
		r.check(RuleLimitedCredential, "InstanceExists"+label, verdict(existsJudge("InstanceExists", ids), o), o)
		o = r.with(r.limited, func() *outcome { return r.call(abi.ExportInstanceMetadata, &node, newMetadata) })
		r.check(RuleLimitedCredential, "InstanceMetadata"+label, verdict(notFoundJudge("InstanceMetadata", ids), o), o)
		running := &outcome{err: errors.New("unknown")}
		if sn.Shutdown == nil || !*sn.Shutdown {
			f := abi.Bool(false)
			running = &outcome{out: &f}
		}
		o = r.with(r.limited, func() *outcome { return r.call(abi.ExportInstanceShutdown, &node, newBool) })
		r.check(RuleLimitedCredential, "InstanceShutdown"+label, verdict(shutdownJudge("InstanceShutdown", running, ids), o), o)
	}
}

// routes checks the route lifecycle: create, list, list under faults
// (never a route missing, blackholed or moved), delete, and delete under
// faults (never success without the cloud's word).
func (r *runner) routes() {
	const rule = RuleRoutes
	nodes := r.spec.targets()
	if len(nodes) == 0 {
		r.skip(rule, "Routes", "the test spec lists no existing node to route to")
		return
	}
	target := nodes[0]
	want := abi.Route{TargetNode: target.Name, TargetNodeAddresses: target.Addresses, DestinationCIDR: r.spec.Routes.destination()}
	req := &abi.RouteRequest{ClusterName: r.cluster, NameHint: target.UID, Route: want}
	create := func() *outcome { return r.call(abi.ExportCreateRoute, req, nil) }
	list := func() *outcome {
		return r.call(abi.ExportListRoutes, &abi.RouteRequest{ClusterName: r.cluster}, newRoutes)
	}
	// ours finds the test route in a listing.
	ours := func(o *outcome) *abi.Route {
		if !o.ok() {
			return nil
		}
		for _, rt := range *o.out.(*abi.Routes) {
			if rt.DestinationCIDR == want.DestinationCIDR {
				return &rt
			}
		}
		return nil
	}
	var listed abi.Route
	del := func() *outcome {
		return r.call(abi.ExportDeleteRoute, &abi.RouteRequest{ClusterName: r.cluster, Route: listed}, nil)
	}
	failed := func(o *outcome, what string) string {
		if o.ok() {
			return ""
		}
		return what + " failed against a healthy cloud"
	}

	// Delete what an interrupted run may have left.
	o := list()
	if r.notImplemented(o, abi.CapabilityRoutes) || !r.check(rule, "ListRoutes before the test", failed(o, "ListRoutes"), o) {
		return
	}
	if rt := ours(o); rt != nil {
		listed = *rt
		if o := del(); !r.check(rule, "DeleteRoute of a route an earlier run left", failed(o, "DeleteRoute"), o) {
			return
		}
	}
	defer func() {
		if rt := ours(list()); rt != nil {
			listed = *rt
			if o := del(); !o.ok() {
				r.check(rule, "DeleteRoute at the end", "DeleteRoute failed against a healthy cloud; the test route may be left", o)
			}
		}
	}()

	o = create()
	if !r.check(rule, "CreateRoute to "+target.Name, failed(o, "CreateRoute"), o) {
		return
	}
	l := list()
	why := failed(l, "ListRoutes")
	rt := ours(l)
	switch {
	case why != "":
	case rt == nil:
		why = "ListRoutes does not list the route CreateRoute made for " + want.DestinationCIDR
	case rt.Blackhole || rt.TargetNode != target.Name:
		why = fmt.Sprintf("ListRoutes lists the route for %s with target %q, blackhole %v; want target %q", want.DestinationCIDR, rt.TargetNode, rt.Blackhole, target.Name)
	}
	if !r.check(rule, "ListRoutes lists the created route", why, l) {
		return
	}
	listed = *rt
	r.underFaults("ListRoutes", l, list, nil, routesJudge(listed))
	again := create()
	r.check(rule, "CreateRoute again: success", failed(again, "CreateRoute of an existing route"), again)
	r.underFaults("CreateRoute", again, create, nil, retryRule)

	cleanDelete := del()
	if !r.check(rule, "DeleteRoute", failed(cleanDelete, "DeleteRoute"), cleanDelete) {
		return
	}
	o = list()
	why = failed(o, "ListRoutes")
	if why == "" && ours(o) != nil {
		why = "ListRoutes still lists the route DeleteRoute deleted"
	}
	r.check(rule, "ListRoutes after delete: not listed", why, o)

	restore := func() bool {
		if o := create(); !o.ok() {
			r.check(rule, "CreateRoute to re-create after a faulted delete", "CreateRoute failed against a healthy cloud", o)
			return false
		}
		return true
	}
	if !restore() {
		return
	}
	r.underFaults("DeleteRoute", cleanDelete, del, func(Fault, int) bool { return restore() }, deleteJudge(RuleRouteDeleteConfirmed, "DeleteRoute",
		"the route controller would take the route for gone while the cloud still routes the CIDR"))
	if r.limited != nil {
		o := r.with(r.limited, del)
		r.check(RuleLimitedCredential, "DeleteRoute with the limited credentials",
			verdict(deleteJudge(RuleLimitedCredential, "DeleteRoute", "the cloud may still route the CIDR"), o), o)
	}
}

// routesJudge: under a fault, ListRoutes fails or lists the route listed
// as the clean listing did: missing, the route controller creates it
// again; blackholed or moved, it deletes it.
func routesJudge(listed abi.Route) func(Fault, *outcome) (string, string) {
	return func(f Fault, o *outcome) (string, string) {
		if !o.ok() {
			return retryRule(f, o)
		}
		i := slices.IndexFunc(*o.out.(*abi.Routes), func(rt abi.Route) bool { return rt.DestinationCIDR == listed.DestinationCIDR })
		if i < 0 {
			return RuleRoutesCompleteOnDoubt, "ListRoutes answered without the route for " + listed.DestinationCIDR + ": the route controller would create it again, or, missing its Node's, mark the Node's network unavailable"
		}
		if got := (*o.out.(*abi.Routes))[i]; got.Blackhole || got.TargetNode != listed.TargetNode {
			return RuleRoutesCompleteOnDoubt, fmt.Sprintf("ListRoutes answered the route for %s with target %q, blackhole %v, though the cloud never said its target changed: the route controller would delete it", listed.DestinationCIDR, got.TargetNode, got.Blackhole)
		}
		return "", ""
	}
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

func newOwned() abi.Message     { return &abi.OwnedLoadBalancers{} }
func newBool() abi.Message      { return new(abi.Bool) }
func newString() abi.Message    { return new(abi.String) }
func newZone() abi.Message      { return &abi.Zone{} }
func newRoutes() abi.Message    { return &abi.Routes{} }
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
