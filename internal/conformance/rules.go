package conformance

import (
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// Rules the suite checks. A failure always names one. Rules describes
// each, and modules/README.md's rules table is made from it.
const (
	RuleCapabilities          = "capabilities"
	RuleInstances             = "instances"
	RuleGoneConfirmed         = "gone-confirmed"
	RuleNeverGoneOnDoubt      = "never-gone-on-doubt"
	RuleNeverShutdownOnDoubt  = "never-shutdown-on-doubt"
	RuleRetryAfter            = "retry-after-on-429"
	RuleCallDeadline          = "call-deadline"
	RuleLBLifecycle           = "lb-lifecycle"
	RuleLBIdempotent          = "lb-idempotent"
	RuleLBPreserved           = "lb-preserved"
	RuleLBDeleteConfirmed     = "lb-delete-confirmed"
	RuleLBListOwn             = "lb-list-own"
	RuleLBListComplete        = "lb-list-complete-on-doubt"
	RuleLBListConsistent      = "lb-list-consistent"
	RuleRoutes                = "routes"
	RuleRoutesCompleteOnDoubt = "routes-complete-on-doubt"
	RuleRouteDeleteConfirmed  = "route-delete-confirmed"
	RuleLimitedCredential     = "limited-credential"
	RuleNoCredentialLeak      = "no-credential-leak"
	RuleRawCredentials        = "raw-credentials"
	RuleWarmRateLimit         = "warm-rate-limit"

	// FaultChecks classes the passing check of one call under one fault,
	// which kept every rule.
	FaultChecks = "faults"
)

// A Rule is one rule of the suite: its name, what it checks as the docs'
// table says it, and, for a rule one call can break, its judge.
type Rule struct {
	Name string
	// Checks is what the rule checks, in Markdown.
	Checks string
	// judge returns the evidence that the call c broke the rule, nil when
	// it did not or the rule does not govern such a call. It is nil for a
	// rule the runner checks over a sequence of calls (a lifecycle, a
	// listing against what was made) or over the whole run.
	judge func(c *callCase) evidence
}

// Rules is every rule the suite checks, in the order of the docs' table.
// TestRulesTable fails when modules/README.md's table differs; TestRuleSites
// when a rule constant has no entry here, or an entry is a rule that no
// judge and no sequence checks.
var Rules = []Rule{
	{Name: RuleCapabilities, Checks: "the module validates; a capability it exports does not answer NotImplemented"},
	{Name: RuleInstances, Checks: "`InstanceExists`, `InstanceMetadata`, `InstanceShutdown` and `GetZoneByProviderID` agree with the spec"},
	{Name: RuleGoneConfirmed, Checks: "an instance answered gone is gone by the cloud's answer in that call, not by what the module kept: a snapshot may predate the instance, and a listing that failed part-way misses some (checked again, clean, after every faulted call)"},
	{Name: RuleNeverGoneOnDoubt, Checks: "under a fault, `InstanceExists` (and `InstanceExistsByProviderID`) false, NotFound from `InstanceMetadata`, `InstanceShutdown`, `InstanceID` or `GetZoneByProviderID`, and `GetLoadBalancer` exists=false come only with the cloud's own 404 or 410 for that instance or load balancer in the same call",
		judge: underFault(goneWithoutWord)},
	{Name: RuleNeverShutdownOnDoubt, Checks: "under a fault, `InstanceShutdown` (and `InstanceShutdownByProviderID`) never answers true for an instance the cloud says is running",
		judge: underFault(shutdownOnDoubt)},
	{Name: RuleRetryAfter, Checks: "a call that fails after a 429 answers RetryAfter",
		judge: notRetryAfter},
	{Name: RuleCallDeadline, Checks: "every call answers by itself at least 100 ms before its deadline (the call timeout, or `slowCloud.callTimeout`), clean or under a fault: one the host stops at its deadline answered nothing. An action slower than that answers RetryAfter, and the suite calls again after it, as the controllers do",
		judge: overran},
	{Name: RuleLBLifecycle, Checks: "delete leftovers, get (absent), ensure (ingress), get (same status), update targets, delete, get (absent), delete again (success)"},
	{Name: RuleLBIdempotent, Checks: "ensuring an existing load balancer sends no create-like request (a POST to a collection, such as `POST /v1/lbs` once `/v1/lbs/lb-1` was seen; a POST to an object or its actions is an update), also under faults, and answers the same status",
		judge: createsExisting},
	{Name: RuleLBPreserved, Checks: "`EnsureLoadBalancer` and `UpdateLoadBalancer` of an existing load balancer, clean or under a fault, leave it in place: `GetLoadBalancer` (and `ListLoadBalancers`, when exported) read before and after the call find it with the same ingress (and name), and the call sent none of the spec's `loadBalancer.destructive` requests, whatever their shape",
		judge: replacesLB},
	{Name: RuleLBDeleteConfirmed, Checks: "under a fault, `EnsureLoadBalancerDeleted` reports success only when the cloud itself answered a destroying request with a 2xx, or said the load balancer was already gone (404, 410)",
		judge: underFault(only(abi.ExportEnsureLoadBalancerDeleted, deleteWithoutWord))},
	{Name: RuleLBListOwn, Checks: "`ListLoadBalancers` names only this cluster's load balancers, each with its Service UID: never the one the suite made for another cluster, nor one the spec lists as `foreign`, clean or under a fault",
		judge: listsForeign},
	{Name: RuleLBListComplete, Checks: "under a fault, `ListLoadBalancers` fails or lists every load balancer of the clean listing, never a shorter list",
		judge: underFault(listsShort)},
	{Name: RuleLBListConsistent, Checks: "`ListLoadBalancers` lists every load balancer `EnsureLoadBalancer` made for this cluster, named as `GetLoadBalancerName` answers and with its Service's UID, and not one `EnsureLoadBalancerDeleted` removed"},
	{Name: RuleRoutes, Checks: "create a route, list it (with its target), create it again (success), delete it, list it (absent)"},
	{Name: RuleRoutesCompleteOnDoubt, Checks: "under a fault, `ListRoutes` fails or lists every route, with its target and not blackholed",
		judge: underFault(routeLost)},
	{Name: RuleRouteDeleteConfirmed, Checks: "under a fault, `DeleteRoute` reports success only with the cloud's word, as `lb-delete-confirmed`",
		judge: underFault(only(abi.ExportDeleteRoute, deleteWithoutWord))},
	{Name: RuleLimitedCredential, Checks: "with `limitedCredentials`, no destructive answer to what the cloud refuses",
		judge: withLimitedCredentials(goneWithoutWord, shutdownOnDoubt, deleteWithoutWord)},
	{Name: RuleNoCredentialLeak, Checks: "no secret of the module's credentials in its log lines, errors, results or request URLs, raw or in any encoding the host searches the module's answers for (hex, percent-encoding, base64)"},
	{Name: RuleRawCredentials, Checks: "reports (never fails) which credentials the module read raw through `credentials.readable`"},
	{Name: RuleWarmRateLimit, Checks: "with `rateLimit.perHour`, the warm phase's requests, extrapolated to an hour, stay within the cloud's limit"},
}

// RulesTable is Rules as a Markdown table, as modules/README.md and
// docs/reference/rules.md show it, with where the suite checks each rule
// (ruleSites, read from the code).
func RulesTable() string {
	var b strings.Builder
	b.WriteString("| rule | checks | checked by |\n| --- | --- | --- |\n")
	for _, r := range Rules {
		b.WriteString("| `" + r.Name + "` | " + r.Checks + " | " + ruleSites[r.Name] + " |\n")
	}
	return b.String()
}

// A verdict is the ruling on one call: the zero verdict accepts it;
// otherwise it names the rule the call broke and holds the evidence, from
// which the failure message is rendered.
type verdict struct {
	rule     string
	evidence evidence
}

func (v verdict) accepted() bool { return v.evidence == nil }

// message is the failure message, "" for an accepted call.
func (v verdict) message() string {
	if v.evidence == nil {
		return ""
	}
	return v.evidence.String()
}

// judge rules on the call c by every rule that has a judge, in the
// table's order, and returns the first rule it broke. retry-after-on-429
// comes last: it is about how a call failed, and a call that broke
// another rule as it failed is reported for that one.
func judge(c *callCase) verdict {
	var retry verdict
	for _, rule := range Rules {
		if rule.judge == nil {
			continue
		}
		e := rule.judge(c)
		switch {
		case e == nil:
		case rule.Name == RuleRetryAfter:
			retry = verdict{rule.Name, e}
		default:
			return verdict{rule.Name, e}
		}
	}
	return retry
}
