package conformance

import (
	"cmp"
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// Request traces the judges are given: what the cloud answered, and the
// faults the suite injected.
var (
	fault500    = Exchange{Method: "GET", URL: "http://cloud/v1/instances/i-0001", Status: 500, Injected: Fault500}
	faultReset  = Exchange{Method: "GET", URL: "http://cloud/v1/instances", Err: "connection reset", Injected: FaultReset}
	cloud404    = Exchange{Method: "GET", URL: "http://cloud/v1/instances/i-0001", Status: 404}
	cloud410    = Exchange{Method: "GET", URL: "http://cloud/v1/servers?name=node-1", Status: 410}
	other404    = Exchange{Method: "GET", URL: "http://cloud/v1/networks/net-1", Status: 404}
	listing200  = Exchange{Method: "GET", URL: "http://cloud/v1/instances?page=1", Status: 200}
	delete2xx   = Exchange{Method: "DELETE", URL: "http://cloud/v1/loadbalancers/lb-1", Status: 204}
	delete404   = Exchange{Method: "DELETE", URL: "http://cloud/v1/loadbalancers/lb-1", Status: 404}
	action2xx   = Exchange{Method: "POST", URL: "http://cloud/v1/networks/4/actions/delete_route", Status: 201}
	delete500   = Exchange{Method: "DELETE", URL: "http://cloud/v1/loadbalancers/lb-1", Status: 500, Injected: Fault500}
	deleteCut   = Exchange{Method: "DELETE", URL: "http://cloud/v1/loadbalancers/lb-1", Status: 200, Injected: FaultTruncated}
	injected429 = Exchange{Method: "GET", URL: "http://cloud/v1/instances/i-0001", Status: 429, Injected: Fault429}
)

func answered(out abi.Message, trace ...Exchange) *outcome {
	return &outcome{status: abi.StatusOK, out: out, trace: trace}
}

func failedWith(status abi.Status, trace ...Exchange) *outcome {
	return &outcome{status: status, err: errors.New(status.String()), trace: trace}
}

func boolean(b bool) *abi.Bool { v := abi.Bool(b); return &v }

type judgeCase struct {
	name  string
	fault Fault // Fault500 unless set
	clean bool  // no fault at all
	o     *outcome
	rule  string // "" accepted
	says  []string
	// evidence, when set, is the verdict's evidence, field by field.
	evidence evidence
}

// runJudge judges each case's outcome as a call of export, by every rule,
// with what about says the suite knew before the call.
func runJudge(t *testing.T, export string, about callCase, cases []judgeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call := about
			call.outcome, call.fault = c.o, cmp.Or(c.fault, Fault500)
			if c.clean {
				call.fault = ""
			}
			c.o.export, c.o.method = export, methodName(export)
			v := judge(&call)
			if v.rule != c.rule {
				t.Fatalf("rule %q (%s), want %q", v.rule, v.message(), c.rule)
			}
			for _, s := range c.says {
				if !strings.Contains(v.message(), s) {
					t.Errorf("message lacks %q:\n%s", s, v.message())
				}
			}
			if c.evidence != nil && !reflect.DeepEqual(v.evidence, c.evidence) {
				t.Errorf("evidence %#v, want %#v", v.evidence, c.evidence)
			}
		})
	}
}

var node1 = instanceIDs(abi.Node{Name: "node-1", ProviderID: "simcloud://i-0001"})

// TestExistsJudge: InstanceExists false under a fault passes only with the
// cloud's own 404 or 410 to a request naming the instance in that call,
// and the message says the rule and what the suite saw.
func TestExistsJudge(t *testing.T) {
	runJudge(t, abi.ExportInstanceExists, callCase{names: node1}, []judgeCase{
		{name: "true", o: answered(boolean(true), fault500, listing200)},
		{name: "error", o: failedWith(abi.StatusError, fault500)},
		{name: "false, then the cloud's 404 for it", o: answered(boolean(false), faultReset, cloud404)},
		{name: "false, the cloud's 410 for its name", o: answered(boolean(false), faultReset, cloud410)},
		{name: "false, the cloud's 404 to a query naming it in the form", o: answered(boolean(false), faultReset, Exchange{Method: "POST", URL: "http://cloud/", Status: 404,
			Form: url.Values{"Action": {"DescribeInstances"}, "InstanceId.1": {"i-0001"}}})},
		{name: "false, the cloud's 404 to a query naming another", o: answered(boolean(false), faultReset, Exchange{Method: "POST", URL: "http://cloud/", Status: 404,
			Form: url.Values{"Action": {"DescribeInstances"}, "InstanceId.1": {"i-0002"}}}), rule: RuleNeverGoneOnDoubt},
		{name: "false on the fault alone", o: answered(boolean(false), fault500), rule: RuleNeverGoneOnDoubt,
			says: []string{"InstanceExists answered false, which deletes the Node. Rule: an answer of \"gone\" needs the cloud's own 404 or 410, in the same call, to a request naming it (node-1, simcloud://i-0001, i-0001). " +
				"Seen: the cloud answered no request of the call with 404 or 410; the suite injected 500 into request 1"},
			evidence: goneEvidence{method: "InstanceExists", answer: "answered false, which deletes the Node", names: node1, injected: []injection{{1, Fault500}}}},
		{name: "false on a 404 for something else", o: answered(boolean(false), faultReset, other404), rule: RuleNeverGoneOnDoubt,
			says:     []string{"the cloud's 404 to GET http://cloud/v1/networks/net-1, which name none of these", "injected connection reset into request 1"},
			evidence: goneEvidence{method: "InstanceExists", answer: "answered false, which deletes the Node", names: node1, otherGone: []Exchange{other404}, injected: []injection{{1, FaultReset}}}},
		{name: "false, clean: judged by the spec, not here", clean: true, o: answered(boolean(false), listing200)},
		{name: "NotFound is not InstanceExists' gone", o: failedWith(abi.StatusNotFound, fault500)},
		{name: "false after an empty listing", o: answered(boolean(false), listing200, fault500), rule: RuleNeverGoneOnDoubt},
		{name: "a plain error after a 429", fault: Fault429, o: failedWith(abi.StatusError, injected429), rule: RuleRetryAfter,
			says: []string{"the cloud answered 429 with Retry-After: 7, and the module answered Error instead of RetryAfter"}, evidence: retryEvidence{answered: abi.StatusError}},
		{name: "RetryAfter after a 429", fault: Fault429, o: failedWith(abi.StatusRetryAfter, injected429)},
	})
}

// TestNotFoundJudge: NotFound under a fault, by the same rule.
func TestNotFoundJudge(t *testing.T) {
	runJudge(t, abi.ExportInstanceMetadata, callCase{names: node1}, []judgeCase{
		{name: "metadata", o: answered(&abi.InstanceMetadata{ProviderID: "simcloud://i-0001"}, fault500, listing200)},
		{name: "error", o: failedWith(abi.StatusError, fault500)},
		{name: "NotFound with the cloud's 404", o: failedWith(abi.StatusNotFound, faultReset, cloud404)},
		{name: "NotFound after a 429: the gone rule, not the 429 one", fault: Fault429, o: failedWith(abi.StatusNotFound, injected429), rule: RuleNeverGoneOnDoubt},
		{name: "NotFound on the cloud's 404 read after a 429", fault: Fault429, o: failedWith(abi.StatusNotFound, injected429, cloud404)},
		{name: "NotFound on the fault", o: failedWith(abi.StatusNotFound, fault500), rule: RuleNeverGoneOnDoubt,
			says: []string{"InstanceMetadata answered NotFound", "the cloud answered no request of the call with 404 or 410"}},
		{name: "NotFound on an injected answer", o: failedWith(abi.StatusNotFound,
			Exchange{Method: "GET", URL: cloud404.URL, Status: 404, Injected: Fault500}), rule: RuleNeverGoneOnDoubt},
	})
}

// TestShutdownJudge: NotFound by the gone rule; true never where the clean
// call said running.
func TestShutdownJudge(t *testing.T) {
	runJudge(t, abi.ExportInstanceShutdown, callCase{names: node1, running: true}, []judgeCase{
		{name: "false", o: answered(boolean(false), fault500, listing200)},
		{name: "error", o: failedWith(abi.StatusError, fault500)},
		{name: "true", o: answered(boolean(true), fault500, listing200), rule: RuleNeverShutdownOnDoubt,
			says: []string{"InstanceShutdown answered true, which taints the Node as shut down, though the cloud said the instance is running"}, evidence: shutdownEvidence{method: "InstanceShutdown"}},
		{name: "true, clean: judged by the spec, not here", clean: true, o: answered(boolean(true), listing200)},
		{name: "NotFound with the cloud's 404", o: failedWith(abi.StatusNotFound, fault500, cloud404)},
		{name: "NotFound on the fault", o: failedWith(abi.StatusNotFound, fault500), rule: RuleNeverGoneOnDoubt},
	})
	runJudge(t, abi.ExportInstanceShutdown, callCase{names: node1}, []judgeCase{
		{name: "true where the clean call said true", o: answered(boolean(true), fault500, listing200)},
	})
}

// TestLBGoneJudge: GetLoadBalancer exists=false by the gone rule, the load
// balancer named by its name or its Service's UID.
func TestLBGoneJudge(t *testing.T) {
	gone := &abi.GetLoadBalancerResult{}
	runJudge(t, abi.ExportGetLoadBalancer, callCase{names: []string{"uid-1", "lb-1"}}, []judgeCase{
		{name: "exists", o: answered(&abi.GetLoadBalancerResult{Exists: true}, fault500, listing200)},
		{name: "gone with the cloud's 404 for it", o: answered(gone, faultReset, Exchange{Method: "GET", URL: "http://cloud/v1/loadbalancers/lb-1", Status: 404})},
		{name: "gone on the fault", o: answered(gone, faultReset), rule: RuleNeverGoneOnDoubt, says: []string{"GetLoadBalancer answered exists=false", "(uid-1, lb-1)"}},
		{name: "gone on an empty search", o: answered(gone, fault500, Exchange{Method: "GET", URL: "http://cloud/v1/loadbalancers?label_selector=uid%3Duid-1", Status: 200}), rule: RuleNeverGoneOnDoubt},
	})
}

// TestDeleteJudge: success under a fault only with the cloud's 2xx or 404
// to a destroying request.
func TestDeleteJudge(t *testing.T) {
	runJudge(t, abi.ExportEnsureLoadBalancerDeleted, callCase{consequence: "the finalizer goes"}, []judgeCase{
		{name: "error", o: failedWith(abi.StatusError, delete500)},
		{name: "the cloud's 204", o: answered(nil, fault500, delete2xx)},
		{name: "the cloud's 404", o: answered(nil, fault500, delete404)},
		{name: "a delete action's 201", o: answered(nil, fault500, action2xx)},
		{name: "a 2xx whose body the suite cut", o: answered(nil, deleteCut)},
		{name: "success on the fault", o: answered(nil, delete500), rule: RuleLBDeleteConfirmed,
			says: []string{"EnsureLoadBalancerDeleted reported success, though the cloud never confirmed a delete (no 2xx or 404 of its own to a DELETE or delete action): the finalizer goes"}},
		{name: "success on a POST to another action", o: answered(nil, fault500, Exchange{Method: "POST", URL: "http://cloud/v1/loadbalancers/lb-1/actions/detach", Status: 201}), rule: RuleLBDeleteConfirmed},
		{name: "success on a lookup's 404", o: answered(nil, cloud404, fault500), rule: RuleLBDeleteConfirmed},
		{name: "a query API delete's 200", o: answered(nil, fault500, Exchange{Method: "POST", URL: "http://cloud/", RequestBody: "Action=DeleteLoadBalancer&LoadBalancerName=lb-1&Version=2012-06-01", Status: 200})},
		{name: "a query API delete in the URL", o: answered(nil, fault500, Exchange{Method: "GET", URL: "http://cloud/?Action=DeleteLoadBalancer&LoadBalancerName=lb-1", Status: 200})},
		{name: "success on a query API read", o: answered(nil, fault500, Exchange{Method: "POST", URL: "http://cloud/", RequestBody: "Action=DescribeLoadBalancers&LoadBalancerNames.member.1=lb-1", Status: 200}), rule: RuleLBDeleteConfirmed},
		{name: "an action named in a body that is not form-encoded", o: answered(nil, fault500, Exchange{Method: "POST", URL: "http://cloud/v1/query", RequestBody: `{"Action":"DeleteLoadBalancer"}`, Status: 200}), rule: RuleLBDeleteConfirmed},
	})
}

// TestRoutesJudge: a listing under a fault fails or has the route, with
// its target, not blackholed.
func TestRoutesJudge(t *testing.T) {
	listed := abi.Route{TargetNode: "node-1", DestinationCIDR: "10.244.250.0/24"}
	routes := func(rs ...abi.Route) *abi.Routes { l := abi.Routes(rs); return &l }
	runJudge(t, abi.ExportListRoutes, callCase{route: &listed}, []judgeCase{
		{name: "listed", o: answered(routes(abi.Route{TargetNode: "node-2", DestinationCIDR: "10.0.0.0/24"}, listed), listing200, fault500)},
		{name: "error", o: failedWith(abi.StatusError, fault500)},
		{name: "missing", o: answered(routes(), fault500), rule: RuleRoutesCompleteOnDoubt, says: []string{"without the route for 10.244.250.0/24"}},
		{name: "blackholed", o: answered(routes(abi.Route{TargetNode: "node-1", DestinationCIDR: listed.DestinationCIDR, Blackhole: true}), fault500), rule: RuleRoutesCompleteOnDoubt},
		{name: "moved", o: answered(routes(abi.Route{TargetNode: "node-2", DestinationCIDR: listed.DestinationCIDR}), fault500), rule: RuleRoutesCompleteOnDoubt},
	})
}

// TestLBListingJudge: a listing under a fault fails, or lists every load
// balancer of the clean listing and none that is not this cluster's.
func TestLBListingJudge(t *testing.T) {
	l := lbListing{cluster: "kubernetes", want: []string{"a1", "a2"},
		foreign: map[string]string{"by-hand": "the test spec lists as foreign", "uid-other": "EnsureLoadBalancer made for cluster other"}}
	owned := func(lbs ...abi.OwnedLoadBalancer) *abi.OwnedLoadBalancers {
		o := abi.OwnedLoadBalancers(lbs)
		return &o
	}
	a1 := abi.OwnedLoadBalancer{Name: "a1", ServiceUID: "uid-1", ClusterName: "kubernetes"}
	a2 := abi.OwnedLoadBalancer{Name: "a2", ServiceUID: "uid-2"}
	page2 := Exchange{Method: "GET", URL: "http://cloud/v1/load_balancers?page=2", Status: 500, Injected: Fault500}
	runJudge(t, abi.ExportListLoadBalancers, callCase{listing: &l}, []judgeCase{
		{name: "complete", o: answered(owned(a1, a2), listing200, listing200)},
		{name: "complete and one more of this cluster's", o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "a3", ServiceUID: "uid-3"}), listing200)},
		{name: "error on page 2", o: failedWith(abi.StatusError, listing200, page2)},
		{name: "page 1 only", o: answered(owned(a1), listing200, page2), rule: RuleLBListComplete,
			says:     []string{"answered 1 load balancers, without \"a2\" of the 2 the clean listing had", "Rule: a listing that fails on any page, or ends short, is an error"},
			evidence: shortListingEvidence{listed: 1, missing: []string{"a2"}, clean: 2}},
		{name: "short, clean: what listings under faults are judged against", clean: true, o: answered(owned(a1), listing200)},
		{name: "empty on a fault", o: answered(owned(), fault500), rule: RuleLBListComplete},
		{name: "another cluster's by its entry", o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "b", ServiceUID: "uid-b", ClusterName: "other"}), listing200), rule: RuleLBListOwn,
			says: []string{`which it says is cluster "other"'s`, "the orphan sweep would delete it"}},
		{name: "another cluster's by its UID", o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "b", ServiceUID: "uid-other"}), listing200), rule: RuleLBListOwn,
			says:     []string{"which EnsureLoadBalancer made for cluster other"},
			evidence: foreignEvidence{cluster: "kubernetes", lb: abi.OwnedLoadBalancer{Name: "b", ServiceUID: "uid-other"}, knownAs: "EnsureLoadBalancer made for cluster other"}},
		{name: "another cluster's, clean", clean: true, o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "b", ServiceUID: "uid-other"}), listing200), rule: RuleLBListOwn},
		{name: "one made by hand", o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "by-hand", ServiceUID: "by-hand"}), listing200), rule: RuleLBListOwn},
		{name: "one without a UID", o: answered(owned(a1, a2, abi.OwnedLoadBalancer{Name: "x"}), listing200), rule: RuleLBListOwn, says: []string{"without its name or its Service's UID"}},
		{name: "a plain error after a 429", fault: Fault429, o: failedWith(abi.StatusError, injected429), rule: RuleRetryAfter},
	})
}

// TestGoneEvidenceNeedsTheCloud: only a 404 or 410 the cloud itself sent
// counts; a transport error never does.
func TestGoneEvidenceNeedsTheCloud(t *testing.T) {
	if cloudSaidGone(Exchange{Status: 404, Injected: FaultTruncated}) || cloudSaidGone(Exchange{Err: "connection reset"}) || !cloudSaidGone(cloud404) {
		t.Fatal("cloudSaidGone")
	}
}

// TestCreatesJudge: ensuring a load balancer that exists sends no
// create-like request, clean or under a fault; and a call that both
// created and failed after a 429 is reported for the duplicate, the 429
// rule coming last.
func TestCreatesJudge(t *testing.T) {
	post := Exchange{Method: "POST", URL: "http://cloud/v1/lbs", Status: 201}
	creates := func(o *outcome) []string {
		if slices.ContainsFunc(o.trace, func(ex Exchange) bool { return ex.Method == post.Method && ex.URL == post.URL }) {
			return []string{"POST /v1/lbs"}
		}
		return nil
	}
	runJudge(t, abi.ExportEnsureLoadBalancer, callCase{creates: creates}, []judgeCase{
		{name: "an update", o: answered(&abi.LoadBalancerStatus{}, listing200, fault500)},
		{name: "a create", o: answered(&abi.LoadBalancerStatus{}, post, fault500), rule: RuleLBIdempotent,
			says:     []string{"EnsureLoadBalancer of an existing load balancer sent create-like requests under a fault (POST /v1/lbs): a duplicate"},
			evidence: createsEvidence{creates: []string{"POST /v1/lbs"}, underFault: true}},
		{name: "a create, clean", clean: true, o: answered(&abi.LoadBalancerStatus{}, post), rule: RuleLBIdempotent,
			says: []string{"EnsureLoadBalancer of an existing load balancer sent create-like requests (POST /v1/lbs): a duplicate"}},
		{name: "a create, then an error after a 429", fault: Fault429, o: failedWith(abi.StatusError, post, injected429), rule: RuleLBIdempotent},
		{name: "an error after a 429", fault: Fault429, o: failedWith(abi.StatusError, injected429), rule: RuleRetryAfter},
	})
	runJudge(t, abi.ExportEnsureLoadBalancer, callCase{}, []judgeCase{
		{name: "a create of one not known to exist", o: answered(&abi.LoadBalancerStatus{}, post, fault500)},
	})
}

// TestLimitedJudge: with the limited credentials, a clean call answers
// nothing destructive the cloud did not say, by the rules that otherwise
// hold under a fault; an error, even a plain one, is fine.
func TestLimitedJudge(t *testing.T) {
	limited := callCase{limited: true, names: node1, running: true, consequence: "the cloud may still route the CIDR"}
	refused := Exchange{Method: "GET", URL: "http://cloud/v1/instances/i-0001", Status: 403}
	runJudge(t, abi.ExportInstanceExists, limited, []judgeCase{
		{name: "an error", clean: true, o: failedWith(abi.StatusError, refused)},
		{name: "false on a 403", clean: true, o: answered(boolean(false), refused), rule: RuleLimitedCredential,
			says: []string{"InstanceExists answered false, which deletes the Node", "the cloud answered no request of the call with 404 or 410"}},
		{name: "false on the cloud's 404", clean: true, o: answered(boolean(false), cloud404)},
	})
	runJudge(t, abi.ExportInstanceShutdown, limited, []judgeCase{
		{name: "true for a running instance", clean: true, o: answered(boolean(true), refused), rule: RuleLimitedCredential, evidence: shutdownEvidence{method: "InstanceShutdown"}},
	})
	runJudge(t, abi.ExportInstanceShutdown, callCase{limited: true, names: node1}, []judgeCase{
		{name: "true for a stopped instance", clean: true, o: answered(boolean(true), refused)},
	})
	runJudge(t, abi.ExportDeleteRoute, limited, []judgeCase{
		{name: "success on a 403", clean: true, o: answered(nil, Exchange{Method: "DELETE", URL: "http://cloud/v1/routes/r-1", Status: 403}), rule: RuleLimitedCredential,
			says: []string{"DeleteRoute reported success, though the cloud never confirmed a delete", ": the cloud may still route the CIDR"}},
	})
}

// TestJudgesGovernTheirCalls: a judge rules only on the calls its rule
// governs: a listing judge without a listing to judge against, or the
// gone rule on a call that cannot say gone, accepts.
func TestJudgesGovernTheirCalls(t *testing.T) {
	runJudge(t, abi.ExportListRoutes, callCase{names: node1}, []judgeCase{
		{name: "ListRoutes without a clean listing", o: answered(&abi.Routes{}, fault500)},
	})
	runJudge(t, abi.ExportCreateRoute, callCase{names: node1, consequence: "gone"}, []judgeCase{
		{name: "CreateRoute success", o: answered(nil, fault500)},
		{name: "CreateRoute NotFound", o: failedWith(abi.StatusNotFound, fault500)},
	})
	runJudge(t, abi.ExportDeleteRoute, callCase{consequence: "the route stays"}, []judgeCase{
		{name: "DeleteRoute success by the route rule", o: answered(nil, fault500), rule: RuleRouteDeleteConfirmed},
	})
}

// TestDeadlineJudge: a call the host stopped at its deadline, or that
// answered within the margin of it, breaks call-deadline whatever it
// answered, before the 429 rule.
func TestDeadlineJudge(t *testing.T) {
	late := func(o *outcome) *outcome {
		o.overran, o.elapsed, o.timeout = true, 2*time.Second, 2*time.Second
		return o
	}
	runJudge(t, abi.ExportEnsureLoadBalancer, callCase{}, []judgeCase{
		{name: "in time", o: failedWith(abi.StatusRetryAfter, fault500)},
		{name: "stopped at the deadline", o: late(failedWith(abi.StatusError, fault500)), rule: RuleCallDeadline,
			says: []string{"EnsureLoadBalancer had no answer of its own 100ms before its 2s call timeout (it ran 2s)", "answer RetryAfter"}},
		{name: "stopped, clean", clean: true, o: late(failedWith(abi.StatusError, listing200)), rule: RuleCallDeadline},
		{name: "stopped after a 429: the deadline, not the 429", fault: Fault429, o: late(failedWith(abi.StatusError, injected429)), rule: RuleCallDeadline},
	})
}

// TestPreservedJudge: an EnsureLoadBalancer or UpdateLoadBalancer after
// which the load balancer is gone, has another ingress or another listed
// name, or that sent a request the spec names destructive, breaks
// lb-preserved; a read that failed proves nothing.
func TestPreservedJudge(t *testing.T) {
	ip := func(a string) []abi.LoadBalancerIngress { return []abi.LoadBalancerIngress{{IP: a}} }
	before := lbState{read: true, exists: true, ingress: ip("203.0.113.1"), listedAs: "a1b2"}
	watch := func(after lbState) *lbWatch { return &lbWatch{before: before, after: after} }
	same, moved, gone := watch(before), watch(lbState{read: true, exists: true, ingress: ip("203.0.113.9"), listedAs: "a1b2"}), watch(lbState{read: true})
	renamed := watch(lbState{read: true, exists: true, ingress: ip("203.0.113.1"), listedAs: "a1b2-2"})
	unread := watch(lbState{})
	queryDescribe := Exchange{Method: "POST", URL: "http://cloud/", Status: 200, RequestBody: "Action=DescribeLoadBalancers&LoadBalancerNames.member.1=a1b2"}
	queryDelete := Exchange{Method: "POST", URL: "http://cloud/", Status: 200, RequestBody: "Action=DeleteLoadBalancer&LoadBalancerName=a1b2"}
	listenersDelete := Exchange{Method: "POST", URL: "http://cloud/", Status: 200, RequestBody: "Action=DeleteLoadBalancerListeners&LoadBalancerName=a1b2"}
	restDelete := Exchange{Method: "DELETE", URL: "http://cloud/v1/lbs/7", Status: 204}
	targetDelete := Exchange{Method: "DELETE", URL: "http://cloud/v1/lbs/7/targets/3", Status: 204}
	destructive := []SpecRequest{{Action: "DeleteLoadBalancer"}, {Method: "DELETE", Path: "/v1/lbs/*"}}
	for _, export := range []string{abi.ExportEnsureLoadBalancer, abi.ExportUpdateLoadBalancer} {
		t.Run(export, func(t *testing.T) {
			cases := []judgeCase{
				{name: "in place", o: failedWith(abi.StatusError, fault500)},
				{name: "in place, clean", clean: true, o: answered(&abi.LoadBalancerStatus{}, queryDescribe)},
				{name: "gone", o: failedWith(abi.StatusError, fault500, restDelete), rule: RuleLBPreserved,
					says: []string{"of an existing load balancer under a fault removed or replaced it (GetLoadBalancer answered exists=false after it; it sent requests the test spec names destructive: DELETE http://cloud/v1/lbs/7 (DELETE /v1/lbs/*))"}},
				{name: "new address, clean", clean: true, o: answered(&abi.LoadBalancerStatus{}, queryDescribe), rule: RuleLBPreserved,
					says: []string{"removed or replaced it (its ingress changed from 203.0.113.1 to 203.0.113.9)"}},
				{name: "listed anew", o: failedWith(abi.StatusError, fault500), rule: RuleLBPreserved, says: []string{`listed it as "a1b2" before and "a1b2-2" after`}},
				{name: "a query delete, same address", o: failedWith(abi.StatusError, fault500, queryDelete), rule: RuleLBPreserved,
					says: []string{"POST http://cloud/ (Action=DeleteLoadBalancer)"}},
				{name: "a delete of a part is no replacement", o: failedWith(abi.StatusError, fault500, listenersDelete, targetDelete)},
				{name: "a read failed: nothing known", o: failedWith(abi.StatusError, fault500)},
			}
			effects := []*lbWatch{same, same, gone, moved, renamed, same, same, unread}
			for i := range cases {
				runJudge(t, export, callCase{effects: effects[i], destructive: destructive}, cases[i:i+1])
			}
		})
	}
	runJudge(t, abi.ExportGetLoadBalancer, callCase{effects: gone, destructive: destructive}, []judgeCase{
		{name: "not a call that keeps it", o: answered(&abi.GetLoadBalancerResult{Exists: true}, restDelete)},
	})
}
