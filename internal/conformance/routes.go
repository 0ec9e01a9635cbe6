package conformance

import (
	"fmt"

	"github.com/wasmccm/wasmccm/abi"
)

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
	// Delete what an interrupted run may have left.
	o := list()
	if r.notImplemented(o, abi.CapabilityRoutes) || !r.check(rule, "ListRoutes before the test", healthyFailure(o, "ListRoutes"), o) {
		return
	}
	if rt := ours(o); rt != nil {
		listed = *rt
		if o := del(); !r.check(rule, "DeleteRoute of a route an earlier run left", healthyFailure(o, "DeleteRoute"), o) {
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
	if !r.check(rule, "CreateRoute to "+target.Name, healthyFailure(o, "CreateRoute"), o) {
		return
	}
	l := list()
	why := healthyFailure(l, "ListRoutes")
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
	r.underFaults("ListRoutes", l, list, nil, callCase{route: rt})
	again := create()
	r.check(rule, "CreateRoute again: success", healthyFailure(again, "CreateRoute of an existing route"), again)
	r.underFaults("CreateRoute", again, create, nil, callCase{})

	cleanDelete := del()
	if !r.check(rule, "DeleteRoute", healthyFailure(cleanDelete, "DeleteRoute"), cleanDelete) {
		return
	}
	o = list()
	why = healthyFailure(o, "ListRoutes")
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
	r.underFaults("DeleteRoute", cleanDelete, del, func(Fault, int) bool { return restore() },
		callCase{consequence: "the route controller would take the route for gone while the cloud still routes the CIDR"})
	if r.limited != nil {
		r.judged(RuleLimitedCredential, "DeleteRoute with the limited credentials",
			&callCase{outcome: r.with(r.limited, del), limited: true, consequence: "the cloud may still route the CIDR"})
	}
}
