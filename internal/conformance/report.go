package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
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
	RuleLBLifecycle           = "lb-lifecycle"
	RuleLBIdempotent          = "lb-idempotent"
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

// RuleInfo is a rule and what it checks, in Markdown, as the rules table
// of modules/README.md shows it.
type RuleInfo struct{ Name, Checks string }

// Rules is every rule the suite checks, in the order of the docs' table.
// TestRulesTable fails when modules/README.md's table differs, and when a
// rule here is one the suite never checks.
var Rules = []RuleInfo{
	{RuleCapabilities, "the module validates; a capability it exports does not answer NotImplemented"},
	{RuleInstances, "`InstanceExists`, `InstanceMetadata`, `InstanceShutdown` and `GetZoneByProviderID` agree with the spec"},
	{RuleGoneConfirmed, "an instance answered gone is gone by the cloud's answer in that call, not by what the module kept: a snapshot may predate the instance, and a listing that failed part-way misses some (checked again, clean, after every faulted call)"},
	{RuleNeverGoneOnDoubt, "under a fault, `InstanceExists` (and `InstanceExistsByProviderID`) false, NotFound from `InstanceMetadata`, `InstanceShutdown`, `InstanceID` or `GetZoneByProviderID`, and `GetLoadBalancer` exists=false come only with the cloud's own 404 or 410 for that instance or load balancer in the same call"},
	{RuleNeverShutdownOnDoubt, "under a fault, `InstanceShutdown` (and `InstanceShutdownByProviderID`) never answers true for an instance the cloud says is running"},
	{RuleRetryAfter, "a call that fails after a 429 answers RetryAfter"},
	{RuleLBLifecycle, "delete leftovers, get (absent), ensure (ingress), get (same status), update targets, delete, get (absent), delete again (success)"},
	{RuleLBIdempotent, "ensuring an existing load balancer sends no create-like request (a POST to a collection, such as `POST /v1/lbs` once `/v1/lbs/lb-1` was seen; a POST to an object or its actions is an update), also under faults, and answers the same status"},
	{RuleLBDeleteConfirmed, "under a fault, `EnsureLoadBalancerDeleted` reports success only when the cloud itself answered a destroying request with a 2xx, or said the load balancer was already gone (404, 410)"},
	{RuleLBListOwn, "`ListLoadBalancers` names only this cluster's load balancers, each with its Service UID: never the one the suite made for another cluster, nor one the spec lists as `foreign`, clean or under a fault"},
	{RuleLBListComplete, "under a fault, `ListLoadBalancers` fails or lists every load balancer of the clean listing, never a shorter list"},
	{RuleLBListConsistent, "`ListLoadBalancers` lists every load balancer `EnsureLoadBalancer` made for this cluster, named as `GetLoadBalancerName` answers and with its Service's UID, and not one `EnsureLoadBalancerDeleted` removed"},
	{RuleRoutes, "create a route, list it (with its target), create it again (success), delete it, list it (absent)"},
	{RuleRoutesCompleteOnDoubt, "under a fault, `ListRoutes` fails or lists every route, with its target and not blackholed"},
	{RuleRouteDeleteConfirmed, "under a fault, `DeleteRoute` reports success only with the cloud's word, as `lb-delete-confirmed`"},
	{RuleLimitedCredential, "with `limitedCredentials`, no destructive answer to what the cloud refuses"},
	{RuleNoCredentialLeak, "no secret of the module's credentials in its log lines, errors, results or request URLs"},
	{RuleRawCredentials, "reports (never fails) which credentials the module read raw through `credentials.readable`"},
	{RuleWarmRateLimit, "with `rateLimit.perHour`, the warm phase's requests, extrapolated to an hour, stay within the cloud's limit"},
}

// RulesTable is Rules as a Markdown table, as modules/README.md and
// docs/reference/rules.md show it.
func RulesTable() string {
	var b strings.Builder
	b.WriteString("| rule | checks |\n| --- | --- |\n")
	for _, r := range Rules {
		b.WriteString("| `" + r.Name + "` | " + r.Checks + " |\n")
	}
	return b.String()
}

// Result is one check.
type Result struct {
	Rule string
	Name string
	// Failure explains a failed check; "" means passed (or skipped).
	Failure string
	Skipped string
	// Trace is the requests of the call that broke the rule.
	Trace    []Exchange
	Duration time.Duration
}

// Passed reports whether the check passed.
func (r Result) Passed() bool { return r.Failure == "" && r.Skipped == "" }

// Report is the outcome of a run.
type Report struct {
	Module   string
	Results  []Result
	Duration time.Duration
	// Throttled is what the cloud's own rate limit cost the run; it
	// never fails a check.
	Throttled Throttling
	// Warm is what the warm phase counted; nil when it did not run.
	Warm    *WarmReport
	secrets []string
}

// Failed counts the failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if res.Failure != "" {
			n++
		}
	}
	return n
}

// Rules returns the rules with at least one failed check, in order of
// first failure.
func (r *Report) Rules() []string {
	var rules []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Failure != "" && !seen[res.Rule] {
			seen[res.Rule] = true
			rules = append(rules, res.Rule)
		}
	}
	return rules
}

// WriteText writes the report for people: one line per check, and under a
// failure what broke the rule, credentials redacted.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "wasmccm test %s\n", r.Module)
	var passed, failed, skipped int
	for _, res := range r.Results {
		switch {
		case res.Failure != "":
			failed++
			fmt.Fprintf(&b, "FAIL %-20s %s\n", res.Rule, res.Name)
			for _, line := range strings.Split(res.Failure, "\n") {
				fmt.Fprintf(&b, "     %s\n", line)
			}
			for _, ex := range res.Trace {
				fmt.Fprintf(&b, "     request: %s\n", ex)
				for _, line := range ex.Bodies() {
					fmt.Fprintf(&b, "     %s\n", line)
				}
			}
		case res.Skipped != "":
			skipped++
			fmt.Fprintf(&b, "SKIP %-20s %s: %s\n", res.Rule, res.Name, res.Skipped)
		default:
			passed++
			fmt.Fprintf(&b, "ok   %-20s %s\n", res.Rule, res.Name)
		}
	}
	if r.Warm != nil {
		r.Warm.write(&b)
	}
	if t := r.Throttled; t.Count > 0 {
		fmt.Fprintf(&b, "the cloud answered 429 (its own rate limit) %d times: waited %s in total, %d reached the module and were not scored\n",
			t.Count, t.Waited.Round(time.Millisecond), t.Passed)
	}
	fmt.Fprintf(&b, "%d checks: %d passed, %d failed, %d skipped (%s)\n", len(r.Results), passed, failed, skipped, r.Duration.Round(time.Millisecond))
	if failed > 0 {
		fmt.Fprintf(&b, "FAILED rules: %s\n", strings.Join(r.Rules(), ", "))
	} else {
		b.WriteString("PASS\n")
	}
	_, err := io.WriteString(w, Redact(b.String(), r.secrets))
	return err
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the report as JUnit XML: one test case per check, its
// class the rule, so CI systems show which rule broke.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSuite{Name: "wasmccm conformance: " + r.Module, Tests: len(r.Results), Time: seconds(r.Duration)}
	for _, res := range r.Results {
		c := junitCase{Classname: res.Rule, Name: Redact(res.Name, r.secrets), Time: seconds(res.Duration)}
		switch {
		case res.Failure != "":
			suite.Failures++
			body := res.Failure
			for _, ex := range res.Trace {
				body += "\nrequest: " + ex.String()
				for _, line := range ex.Bodies() {
					body += "\n" + line
				}
			}
			first, _, _ := strings.Cut(res.Failure, "\n")
			c.Failure = &junitFailure{Message: Redact(first, r.secrets), Type: res.Rule, Body: Redact(body, r.secrets)}
		case res.Skipped != "":
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: res.Skipped}
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
