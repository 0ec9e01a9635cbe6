package conformance

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// A callCase is one module call as the judges see it: what it answered
// and the requests it made (its outcome), the fault the suite injected
// into one of them, and what the suite knew of the call's object before.
type callCase struct {
	*outcome
	// fault is the fault injected into one of the call's requests; "" for
	// a clean call.
	fault Fault
	// names are what names the call's object, an instance or a load
	// balancer, in a request: the cloud's word that it is gone must answer
	// a request naming it.
	names []string
	// running says the same call, clean, answered that the instance runs.
	running bool
	// limited says the call ran with the spec's limited credentials.
	limited bool
	// consequence is what a delete reported without the cloud's word
	// costs, for the failure message.
	consequence string
	// creates returns the create-like requests of a call that ensures a
	// load balancer known to exist; nil when none is.
	creates func(*outcome) []string
	// listing is what a ListLoadBalancers is judged against.
	listing *lbListing
	// route is the route a clean ListRoutes listed.
	route *abi.Route
	// effects is the load balancer as the suite read it before and after
	// an EnsureLoadBalancer or UpdateLoadBalancer of it; nil when the
	// call is not judged by its effects.
	effects *lbWatch
	// destructive are the spec's requests that destroy a load balancer.
	destructive []SpecRequest
}

// underFault limits check to calls with an injected fault: the rules
// that say "under a fault".
func underFault(check func(*callCase) evidence) func(*callCase) evidence {
	return func(c *callCase) evidence {
		if c.fault == "" {
			return nil
		}
		return check(c)
	}
}

// only limits check to the calls of export.
func only(export string, check func(*callCase) evidence) func(*callCase) evidence {
	return func(c *callCase) evidence {
		if c.export != export {
			return nil
		}
		return check(c)
	}
}

// withLimitedCredentials judges a call made with the limited credentials
// by checks, fault or not: what the cloud refuses must read as neither
// gone, shut down nor deleted.
func withLimitedCredentials(checks ...func(*callCase) evidence) func(*callCase) evidence {
	return func(c *callCase) evidence {
		if !c.limited {
			return nil
		}
		for _, check := range checks {
			if e := check(c); e != nil {
				return e
			}
		}
		return nil
	}
}

// goneWithoutWord: an answer that the call's object is gone must rest on
// the cloud's own 404 or 410, in the same call, to a request naming it.
func goneWithoutWord(c *callCase) evidence {
	answer := goneAnswer(c.outcome)
	if answer == "" || c.cloudSaidItGone() {
		return nil
	}
	e := goneEvidence{method: c.method, answer: answer, names: c.names}
	for i, ex := range c.trace {
		if cloudSaidGone(ex) {
			e.otherGone = append(e.otherGone, ex)
		}
		if ex.Injected != "" {
			e.injected = append(e.injected, injection{request: i + 1, fault: ex.Injected})
		}
	}
	return e
}

// cloudSaidItGone reports whether the cloud itself answered 404 or 410,
// in the call, to a request naming the call's object.
func (c *callCase) cloudSaidItGone() bool {
	return slices.ContainsFunc(c.trace, func(ex Exchange) bool { return cloudSaidGone(ex) && names(ex, c.names) })
}

// goneAnswer is how the call o said its object is gone, as the failure
// message puts it; "" when it did not. On these answers an upstream
// controller deletes the Node, or creates the load balancer again.
func goneAnswer(o *outcome) string {
	switch o.export {
	case abi.ExportInstanceExists, abi.ExportInstanceExistsByProviderID:
		if o.ok() && !bool(*o.out.(*abi.Bool)) {
			return "answered false, which deletes the Node"
		}
	case abi.ExportInstanceMetadata, abi.ExportInstanceShutdown, abi.ExportInstanceShutdownByProviderID, abi.ExportInstanceID, abi.ExportGetZoneByProviderID:
		if o.status == abi.StatusNotFound {
			return `answered NotFound ("instance not found"), on which the Node is deleted`
		}
	case abi.ExportGetLoadBalancer:
		if o.ok() && !o.out.(*abi.GetLoadBalancerResult).Exists {
			return "answered exists=false for a load balancer that exists"
		}
	}
	return ""
}

// shutdownOnDoubt: InstanceShutdown never answers true (the Node is
// tainted and its pods evicted) when the clean call said running.
func shutdownOnDoubt(c *callCase) evidence {
	if c.export != abi.ExportInstanceShutdown && c.export != abi.ExportInstanceShutdownByProviderID {
		return nil
	}
	if c.running && c.ok() && bool(*c.out.(*abi.Bool)) {
		return shutdownEvidence{method: c.method}
	}
	return nil
}

// notRetryAfter: an error after an injected 429 must be RetryAfter, but
// for NotFound on the cloud's own word, read after the 429 (a read by ID
// after a listing that failed): that is an answer, not a failure.
func notRetryAfter(c *callCase) evidence {
	if c.status == abi.StatusNotFound && c.cloudSaidItGone() {
		return nil
	}
	if c.fault == Fault429 && !c.ok() && c.status != abi.StatusRetryAfter {
		return retryEvidence{answered: c.status}
	}
	return nil
}

// createsExisting: ensuring a load balancer that exists creates nothing.
func createsExisting(c *callCase) evidence {
	if c.creates == nil || c.export != abi.ExportEnsureLoadBalancer {
		return nil
	}
	if creates := c.creates(c.outcome); len(creates) > 0 {
		return createsEvidence{creates: creates, underFault: c.fault != ""}
	}
	return nil
}

// overran: a call answers by itself before its deadline.
func overran(c *callCase) evidence {
	if !c.overran {
		return nil
	}
	return deadlineEvidence{method: c.method, elapsed: c.elapsed, timeout: c.timeout}
}

// replacesLB: ensuring or updating a load balancer that exists leaves it
// in place. What the suite read of it before and after the call is the
// judge whatever the API's shape; the spec's destructive requests catch
// a replacement the reads cannot tell apart (a name-derived address).
func replacesLB(c *callCase) evidence {
	if c.effects == nil || c.export != abi.ExportEnsureLoadBalancer && c.export != abi.ExportUpdateLoadBalancer {
		return nil
	}
	e := replacedEvidence{method: c.method, underFault: c.fault != "", before: c.effects.before, after: c.effects.after}
	for _, ex := range c.trace {
		for _, d := range c.destructive {
			if d.matches(ex) {
				e.destructive = append(e.destructive, ex.Method+" "+ex.URL+" ("+d.String()+")")
			}
		}
	}
	if e.changed() == "" && len(e.destructive) == 0 {
		return nil
	}
	return e
}

// deleteWithoutWord: a delete that answers success must have the cloud's
// word for it.
func deleteWithoutWord(c *callCase) evidence {
	if c.export != abi.ExportEnsureLoadBalancerDeleted && c.export != abi.ExportDeleteRoute {
		return nil
	}
	if c.ok() && !confirmedDestroyed(c.trace) {
		return deleteEvidence{method: c.method, consequence: c.consequence}
	}
	return nil
}

// listsForeign: a listing of this cluster's load balancers names none
// that is not provably this cluster's.
func listsForeign(c *callCase) evidence {
	if c.listing == nil || !c.ok() {
		return nil
	}
	return c.listing.foreignIn(c.outcome)
}

// listsShort: a listing under a fault has every load balancer of the
// clean listing.
func listsShort(c *callCase) evidence {
	if c.listing == nil || !c.ok() {
		return nil
	}
	return c.listing.shortIn(c.outcome)
}

// routeLost: a listing has the route the clean listing had, as it had it:
// missing, the route controller creates it again; blackholed or moved, it
// deletes it.
func routeLost(c *callCase) evidence {
	if c.route == nil || !c.ok() {
		return nil
	}
	listed := *c.out.(*abi.Routes)
	i := slices.IndexFunc(listed, func(rt abi.Route) bool { return rt.DestinationCIDR == c.route.DestinationCIDR })
	if i < 0 {
		return routeEvidence{cidr: c.route.DestinationCIDR}
	}
	if got := listed[i]; got.Blackhole || got.TargetNode != c.route.TargetNode {
		return routeEvidence{cidr: c.route.DestinationCIDR, got: &got}
	}
	return nil
}

// destroys reports whether ex asks the cloud to destroy something: a
// DELETE, a POST to an action whose name says delete or remove
// (POST /networks/4/actions/delete_route), or a query API request whose
// Action does (Action=DeleteLoadBalancer). The suite knows no cloud's
// API: the HTTP method is the one structured sign of intent, and
// action-style APIs name the verb in the path's last segment or the
// Action. The name test can only widen what counts as the cloud's word
// for a delete; an action named otherwise is not taken for a destroying
// request.
func destroys(ex Exchange) bool {
	if ex.Method == "DELETE" {
		return true
	}
	if action := queryAction(ex); action != "" {
		return destroyingVerb(action)
	}
	if ex.Method != "POST" {
		return false
	}
	p := urlPath(ex.URL)
	return destroyingVerb(p[strings.LastIndex(p, "/")+1:])
}

// destroyingVerb reports whether an action's or a path's last segment
// names a destruction.
func destroyingVerb(name string) bool {
	name = strings.ToLower(name)
	return strings.Contains(name, "delete") || strings.Contains(name, "remove") ||
		strings.Contains(name, "terminate") || strings.Contains(name, "deregister")
}

// queryAction is the Action of a query API request (AWS's EC2 and ELB):
// in the URL's query, or in a form-encoded body; "" for any other request.
// A body recorded without its content type (a trace written by hand)
// is read as a form when it starts with Action=, as the SDKs write it.
func queryAction(ex Exchange) string {
	if u, err := url.Parse(ex.URL); err == nil {
		if action := u.Query().Get("Action"); action != "" {
			return action
		}
	}
	return form(ex).Get("Action")
}

// form is the request's form-encoded body, parsed; nil for another body.
func form(ex Exchange) url.Values {
	if ex.Form != nil {
		return ex.Form
	}
	if ex.Method == "POST" && strings.HasPrefix(ex.RequestBody, "Action=") {
		f, _ := url.ParseQuery(ex.RequestBody)
		return f
	}
	return nil
}

// confirmedDestroyed reports whether the cloud itself, not the suite,
// answered one of trace's destroying requests with success (a 2xx, whose
// body the suite may have cut: the cloud acted), or said the object was
// already gone (404 or 410).
func confirmedDestroyed(trace []Exchange) bool {
	return slices.ContainsFunc(trace, func(ex Exchange) bool {
		if !destroys(ex) || ex.Err != "" || ex.Injected != "" && ex.Injected != FaultTruncated {
			return false
		}
		return ex.Status/100 == 2 || ex.Status == 404 || ex.Status == 410
	})
}

// cloudSaidGone reports whether the cloud itself, not the suite, answered
// ex with 404 or 410: its word that what ex asked for is gone. The suite
// never injects either.
func cloudSaidGone(ex Exchange) bool {
	return ex.Err == "" && ex.Injected == "" && (ex.Status == 404 || ex.Status == 410)
}

// names reports whether the request ex names one of ids, as a segment of
// its path, a value of its query or of its form body (a query API's
// InstanceId.1=i-0001).
func names(ex Exchange, ids []string) bool {
	u, err := url.Parse(ex.URL)
	if err != nil {
		return false
	}
	parts := strings.Split(u.Path, "/")
	for _, vs := range u.Query() {
		parts = append(parts, vs...)
	}
	for _, vs := range form(ex) {
		parts = append(parts, vs...)
	}
	return slices.ContainsFunc(parts, func(p string) bool { return p != "" && slices.Contains(ids, p) })
}

func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.TrimSuffix(u.Path, "/")
}

// evidence is what broke a rule, field by field; String renders it as
// the failure message.
type evidence interface{ String() string }

// goneEvidence: the call answered its object gone without the cloud's
// own 404 or 410 to a request naming it.
type goneEvidence struct {
	method string
	// answer is how it said gone, and what that makes a controller do.
	answer string
	names  []string
	// otherGone are the cloud's own 404s and 410s in the call, to
	// requests naming none of names.
	otherGone []Exchange
	injected  []injection
}

// injection is a fault the suite injected into a request of a call,
// counted from 1.
type injection struct {
	request int
	fault   Fault
}

func (e goneEvidence) String() string {
	why := e.method + " " + e.answer + ". Rule: an answer of \"gone\" needs the cloud's own 404 or 410, in the same call, to a request naming it (" + strings.Join(e.names, ", ") + "). Seen: "
	if len(e.otherGone) == 0 {
		why += "the cloud answered no request of the call with 404 or 410"
	} else {
		other := make([]string, len(e.otherGone))
		for i, ex := range e.otherGone {
			other[i] = fmt.Sprintf("%d to %s %s", ex.Status, ex.Method, ex.URL)
		}
		why += "the cloud's " + strings.Join(other, "; ") + ", which name none of these"
	}
	for _, in := range e.injected {
		why += fmt.Sprintf("; the suite injected %s into request %d", in.fault, in.request)
	}
	return why
}

// shutdownEvidence: the call answered shut down for an instance the
// clean call said runs.
type shutdownEvidence struct{ method string }

func (e shutdownEvidence) String() string {
	return e.method + " answered true, which taints the Node as shut down, though the cloud said the instance is running"
}

// retryEvidence: the call answered another status than RetryAfter after
// an injected 429.
type retryEvidence struct{ answered abi.Status }

func (e retryEvidence) String() string {
	return fmt.Sprintf("the cloud answered 429 with Retry-After: %d, and the module answered %s instead of RetryAfter", injectedRetryAfter, e.answered)
}

// createsEvidence: ensuring a load balancer that exists sent create-like
// requests.
type createsEvidence struct {
	creates    []string
	underFault bool
}

func (e createsEvidence) String() string {
	if e.underFault {
		return "EnsureLoadBalancer of an existing load balancer sent create-like requests under a fault (" + strings.Join(e.creates, ", ") + "): a duplicate"
	}
	return "EnsureLoadBalancer of an existing load balancer sent create-like requests (" + strings.Join(e.creates, ", ") + "): a duplicate"
}

// deadlineEvidence: the call had no answer of its own in time.
type deadlineEvidence struct {
	method           string
	elapsed, timeout time.Duration
}

func (e deadlineEvidence) String() string {
	return fmt.Sprintf("%s had no answer of its own %s before its %s call timeout (it ran %s): the host stops such a call and the controller gets no answer. Poll while there is time for one more request, then answer RetryAfter (modules/README.md, Asynchronous cloud actions)",
		e.method, deadlineMargin, e.timeout, e.elapsed.Round(time.Millisecond))
}

// replacedEvidence: an EnsureLoadBalancer or UpdateLoadBalancer of an
// existing load balancer removed or replaced it.
type replacedEvidence struct {
	method        string
	underFault    bool
	before, after lbState
	// destructive are the call's requests that match the spec's
	// loadBalancer.destructive.
	destructive []string
}

// changed says how the load balancer changed between the reads, "" when
// it did not or a read failed.
func (e replacedEvidence) changed() string {
	b, a := e.before, e.after
	switch {
	case !b.read || !a.read || !b.exists:
	case !a.exists:
		return "GetLoadBalancer answered exists=false after it"
	case !slices.Equal(b.ingress, a.ingress):
		return fmt.Sprintf("its ingress changed from %s to %s", ingressList(b.ingress), ingressList(a.ingress))
	case b.listedAs != "" && a.listedAs != b.listedAs:
		return fmt.Sprintf("ListLoadBalancers listed it as %q before and %q after", b.listedAs, a.listedAs)
	}
	return ""
}

func (e replacedEvidence) String() string {
	var why []string
	if c := e.changed(); c != "" {
		why = append(why, c)
	}
	if len(e.destructive) > 0 {
		why = append(why, "it sent requests the test spec names destructive: "+strings.Join(e.destructive, ", "))
	}
	under := ""
	if e.underFault {
		under = " under a fault"
	}
	return e.method + " of an existing load balancer" + under + " removed or replaced it (" + strings.Join(why, "; ") +
		"): its address and the connections through it would be lost. On doubt, answer an error and let the controller call again"
}

func ingressList(in []abi.LoadBalancerIngress) string {
	if len(in) == 0 {
		return "none"
	}
	var s []string
	for _, i := range in {
		s = append(s, cmp.Or(i.IP, i.Hostname))
	}
	return strings.Join(s, ",")
}

// deleteEvidence: the call reported a delete done that the cloud never
// confirmed.
type deleteEvidence struct{ method, consequence string }

func (e deleteEvidence) String() string {
	return e.method + " reported success, though the cloud never confirmed a delete (no 2xx or 404 of its own to a DELETE or delete action): " + e.consequence
}

// routeEvidence: a listing lost the route for cidr, or listed it as got,
// blackholed or with another target.
type routeEvidence struct {
	cidr string
	got  *abi.Route
}

func (e routeEvidence) String() string {
	if e.got == nil {
		return "ListRoutes answered without the route for " + e.cidr + ": the route controller would create it again, or, missing its Node's, mark the Node's network unavailable"
	}
	return fmt.Sprintf("ListRoutes answered the route for %s with target %q, blackhole %v, though the cloud never said its target changed: the route controller would delete it", e.cidr, e.got.TargetNode, e.got.Blackhole)
}
