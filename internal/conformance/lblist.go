package conformance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

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
	otherCluster, theirs := spec.OtherCluster.name(r.cluster), r.spec.serviceNamed(test.Name+"-other-cluster")
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
	r.judged(RuleLBListOwn, fmt.Sprintf("ListLoadBalancers names only cluster %s's", r.cluster), &callCase{outcome: clean, listing: &l})
	var missing []string
	for _, svc := range ours {
		missing = append(missing, l.unlisted(clean, svc, r.lbName(svc))...)
	}
	r.check(RuleLBListConsistent, fmt.Sprintf("ListLoadBalancers lists the %d load balancers EnsureLoadBalancer made", len(ours)), strings.Join(missing, "; "), clean)
	for _, lb := range *clean.out.(*abi.OwnedLoadBalancers) {
		l.want = append(l.want, lb.Name)
	}
	r.underFaults("ListLoadBalancers", clean, list, nil, callCase{listing: &l})

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
	cfg.ClusterName = oc.name(r.cluster)
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

// foreignIn is the evidence against the first entry of the listing o
// that is not provably this cluster's, which the host's sweep would
// delete; nil when there is none.
func (l *lbListing) foreignIn(o *outcome) evidence {
	for _, lb := range *o.out.(*abi.OwnedLoadBalancers) {
		e := foreignEvidence{cluster: l.cluster, lb: lb, knownAs: cmp.Or(l.foreign[lb.Name], l.foreign[lb.ServiceUID])}
		if e.otherCluster() || e.knownAs != "" || lb.Name == "" || lb.ServiceUID == "" {
			return e
		}
	}
	return nil
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

// shortIn is the evidence that the listing o lacks load balancers the
// clean listing had; nil when it has them all.
func (l *lbListing) shortIn(o *outcome) evidence {
	listed := *o.out.(*abi.OwnedLoadBalancers)
	var missing []string
	for _, name := range l.want {
		if !slices.ContainsFunc(listed, func(lb abi.OwnedLoadBalancer) bool { return lb.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return shortListingEvidence{listed: len(listed), missing: missing, clean: len(l.want)}
}

// foreignEvidence: a listing of cluster's load balancers named lb, which
// is not provably cluster's.
type foreignEvidence struct {
	cluster string
	lb      abi.OwnedLoadBalancer
	// knownAs is what the suite knows lb to be, by its name or its
	// Service's UID: another cluster's, or one the spec lists as foreign.
	knownAs string
}

// otherCluster reports whether the entry itself names another cluster.
func (e foreignEvidence) otherCluster() bool {
	return e.lb.ClusterName != "" && e.lb.ClusterName != e.cluster
}

func (e foreignEvidence) String() string {
	what := "without its name or its Service's UID, which nothing ties to a Service of this cluster"
	switch {
	case e.otherCluster():
		what = "which it says is cluster " + strconv.Quote(e.lb.ClusterName) + "'s"
	case e.knownAs != "":
		what = "which " + e.knownAs
	}
	return fmt.Sprintf("ListLoadBalancers for cluster %s named load balancer %q (Service UID %q), %s: the orphan sweep would delete it. Rule: list only what carries this cluster's tag and a Service UID",
		e.cluster, e.lb.Name, e.lb.ServiceUID, what)
}

// shortListingEvidence: a listing under a fault answered listed load
// balancers, without the missing ones of the clean listing's clean.
type shortListingEvidence struct {
	listed  int
	missing []string
	clean   int
}

func (e shortListingEvidence) String() string {
	quoted := make([]string, len(e.missing))
	for i, name := range e.missing {
		quoted[i] = strconv.Quote(name)
	}
	return fmt.Sprintf("ListLoadBalancers answered %d load balancers, without %s of the %d the clean listing had. Rule: a listing that fails on any page, or ends short, is an error, never a shorter list",
		e.listed, strings.Join(quoted, ", "), e.clean)
}
