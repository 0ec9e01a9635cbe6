package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// loadBalancer checks the load balancer lifecycle of the spec's Service
// (delete leftovers, get, ensure, get, ensure again, update, delete, get,
// delete again), each step that reached the cloud also under every fault,
// and deletion under every fault with the load balancer re-created after
// each.
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
	// Whatever happens, leave no test load balancer behind.
	defer func() {
		if o := del(); !o.ok() && o.status != abi.StatusNotImplemented {
			r.check(rule, "EnsureLoadBalancerDeleted at the end", "EnsureLoadBalancerDeleted failed against a healthy cloud; the test load balancer may be left", o)
		}
	}()

	// Delete what an interrupted run may have left, then the lifecycle.
	o := del()
	if r.notImplemented(o, abi.CapabilityLoadBalancer) || !step("EnsureLoadBalancerDeleted before the test", o, healthyFailure(o, "EnsureLoadBalancerDeleted")) {
		return
	}
	o = get()
	if !step("GetLoadBalancer before create: not exists", o, lbExists(o, false)) {
		return
	}
	created := ensure()
	if !step("EnsureLoadBalancer creates", created, healthyFailure(created, "EnsureLoadBalancer")+noIngress(created)) {
		return
	}
	status := created.out.(*abi.LoadBalancerStatus)
	o = get()
	why := lbExists(o, true)
	if why == "" && !sameStatus(&o.out.(*abi.GetLoadBalancerResult).Status, status) {
		why = "GetLoadBalancer answered another status than EnsureLoadBalancer"
	}
	step("GetLoadBalancer after ensure: exists, same status", o, why)
	// From here the load balancer exists: ensuring it creates nothing,
	// and ensuring or updating it leaves it in place.
	watch := &lbWatch{read: func() lbState { return r.readLB(svc) }}
	watch.after = watch.read()
	existing := callCase{creates: r.creates, effects: watch, destructive: r.spec.LoadBalancer.Destructive}
	again := ensure()
	watch.observe()
	why = healthyFailure(again, "EnsureLoadBalancer of an existing load balancer")
	againRule := RuleLBIdempotent
	if why == "" {
		c := existing
		c.outcome = again
		if v := judge(&c); !v.accepted() {
			againRule, why = v.rule, v.message()
		} else if !sameStatus(again.out.(*abi.LoadBalancerStatus), status) {
			why = "EnsureLoadBalancer of an existing load balancer answered another status"
		}
	}
	r.check(againRule, "EnsureLoadBalancer again: same status, nothing created, nothing replaced", why, again)

	r.underFaults("GetLoadBalancer", o, get, nil, callCase{names: r.lbIDs(svc)})
	r.underFaults("EnsureLoadBalancer", again, ensure, watch.observeAfter, existing)

	o = update()
	watch.observe()
	if !step("UpdateLoadBalancer with one target less", o, healthyFailure(o, "UpdateLoadBalancer")) {
		return
	}
	updated := callCase{effects: watch, destructive: r.spec.LoadBalancer.Destructive}
	c := updated
	c.outcome = o
	r.judged(RuleLBPreserved, "UpdateLoadBalancer leaves the load balancer in place", &c)
	r.underFaults("UpdateLoadBalancer", o, update, watch.observeAfter, updated)

	cleanDelete := del()
	if !step("EnsureLoadBalancerDeleted", cleanDelete, healthyFailure(cleanDelete, "EnsureLoadBalancerDeleted")) {
		return
	}
	o = get()
	step("GetLoadBalancer after delete: not exists", o, lbExists(o, false))
	o = del()
	step("EnsureLoadBalancerDeleted again: success", o, healthyFailure(o, "EnsureLoadBalancerDeleted of a deleted load balancer"))

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
	const unconfirmed = "the load balancer may still exist and the Service's finalizer would be removed"
	r.underFaults("EnsureLoadBalancerDeleted", cleanDelete, del, func(Fault, int) bool { return restore() }, callCase{consequence: unconfirmed})
	if r.limited != nil {
		r.judged(RuleLimitedCredential, "EnsureLoadBalancerDeleted with the limited credentials",
			&callCase{outcome: r.with(r.limited, del), limited: true, consequence: unconfirmed})
	}
}

// lbState is the test load balancer as the suite read it through the
// module, clean, between two calls.
type lbState struct {
	// read says both reads answered; otherwise nothing is known.
	read    bool
	exists  bool
	ingress []abi.LoadBalancerIngress
	// listedAs is the name ListLoadBalancers lists it by, "" when the
	// module exports no lister or does not list it.
	listedAs string
}

// readLB reads the load balancer of svc: GetLoadBalancer, and the
// module's lister when it exports one.
func (r *runner) readLB(svc abi.Service) lbState {
	o := r.call(abi.ExportGetLoadBalancer, &abi.LoadBalancerRequest{ClusterName: r.cluster, Service: svc}, newGetResult)
	if !o.ok() {
		return lbState{}
	}
	got := o.out.(*abi.GetLoadBalancerResult)
	s := lbState{read: true, exists: got.Exists, ingress: got.Status.Ingress}
	if !r.info.Exports(abi.ExportListLoadBalancers) {
		return s
	}
	cluster := abi.String(r.cluster)
	if o = r.call(abi.ExportListLoadBalancers, &cluster, newOwned); !o.ok() {
		return lbState{}
	}
	for _, lb := range *o.out.(*abi.OwnedLoadBalancers) {
		if lb.ServiceUID == svc.UID {
			s.listedAs = lb.Name
		}
	}
	return s
}

// lbWatch holds the reads of the load balancer around the call being
// judged: observe moves the last read to before and reads again.
type lbWatch struct {
	read          func() lbState
	before, after lbState
}

func (w *lbWatch) observe() {
	w.before, w.after = w.after, w.read()
}

// observeAfter is observe as underFaults' after hook.
func (w *lbWatch) observeAfter(Fault, int) bool {
	w.observe()
	return true
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
