// Package conformance_test runs `wasmccm test`, the conformance suite, to the
// end against real modules: every first-party module built with each
// toolchain against its cloud's fake, a module with one deliberate bug per
// rule, and a cloud that limits its rate. Each run compiles and calls a
// module hundreds of times, so these runs take minutes: they are set apart
// from the command's unit tests (internal/wasmccmcli) and run with the
// end-to-end phase of `make test`, when WASMCCM_E2E is set.
package conformance_test

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/internal/conformance/conformancetest"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/internal/wasmccmcli"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

func TestMain(m *testing.M) {
	if os.Getenv("WASMCCM_E2E") == "" {
		fmt.Println("skipped: set WASMCCM_E2E=1 to run the conformance suite against every first-party module (minutes)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCLI runs the wasmccm command in-process and returns its exit code,
// stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := wasmccmcli.Run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestConformancePasses: the first-party modules pass every rule against
// their clouds' fakes, built with each toolchain, and the JUnit report says
// so case by case.
func TestConformancePasses(t *testing.T) {
	tcs, err := wasmbuild.Toolchains()
	if err != nil {
		t.Fatal(err)
	}
	modules := []struct {
		name string
		// module is the directory under modules/; default name.
		module string
		env    func(testing.TB) (config, spec string)
		// snapshot: the module keeps a snapshot of the cloud's
		// instances, so its warm phase costs far fewer requests than
		// its cold calls would.
		snapshot bool
	}{
		{name: "simcloud", env: func(t testing.TB) (string, string) { return conformancetest.Simcloud(t, "", "") }, snapshot: true},
		{name: "hcloud", env: conformancetest.Hcloud, snapshot: true},
		{name: "aws", env: conformancetest.AWS},
		{name: "aws-nlb", module: "aws", env: conformancetest.AWSNLB},
		{name: "digitalocean", env: conformancetest.DigitalOcean, snapshot: true},
	}
	for _, m := range modules {
		for _, tc := range tcs {
			t.Run(m.name+"/"+string(tc), func(t *testing.T) {
				t.Parallel() // each has its own cloud
				config, spec := m.env(t)
				junit := filepath.Join(t.TempDir(), "report.xml")
				code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, "-junit", junit, conformancetest.Module(t, "../../modules/"+cmp.Or(m.module, m.name)+"/module", tc))
				if code != 0 || !strings.HasSuffix(out, "PASS\n") {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				for _, rule := range []string{conformance.RuleCapabilities, conformance.RuleInstances, conformance.RuleNoCredentialLeak,
					conformance.FaultChecks, conformance.RuleLBLifecycle, conformance.RuleLBIdempotent, conformance.RuleLBPreserved, conformance.RuleCallDeadline} {
					if !strings.Contains(out, "ok   "+rule) {
						t.Errorf("no passed %s check in\n%s", rule, out)
					}
				}
				if !strings.Contains(out, "ok   "+conformance.RuleRawCredentials+"      no credential read raw\n") {
					t.Errorf("the report does not say the module read no credential raw:\n%s", out)
				}
				warm, cold := warmTotals(t, out)
				t.Logf("warm phase: %d requests per hour, %d from empty state\n%s", warm, cold, out[strings.LastIndex(out, "warm phase:"):])
				if m.snapshot && warm*2 > cold {
					t.Errorf("the warm phase costs %d requests per hour, not far below the %d of cold calls:\n%s", warm, cold, out)
				}
				var report struct {
					Suites []struct {
						Tests    int `xml:"tests,attr"`
						Failures int `xml:"failures,attr"`
						Cases    []struct {
							Name string `xml:"name,attr"`
						} `xml:"testcase"`
					} `xml:"testsuite"`
				}
				data, err := os.ReadFile(junit)
				if err != nil {
					t.Fatal(err)
				}
				if err := xml.Unmarshal(data, &report); err != nil {
					t.Fatalf("JUnit report: %v\n%s", err, data)
				}
				if s := report.Suites; len(s) != 1 || s[0].Failures != 0 || s[0].Tests != len(s[0].Cases) || s[0].Tests != strings.Count(out, "\nok   ")+strings.Count(out, "\nSKIP ") {
					t.Fatalf("JUnit report disagrees with the text one: %+v", report)
				}
			})
		}
	}
}

// warmTotals reads the warm phase's requests per hour, and what the same
// calls would cost from empty state, from a report.
func warmTotals(t *testing.T, out string) (warm, cold int) {
	t.Helper()
	_, line, ok := strings.Cut(out, "\n  total ")
	if !ok {
		t.Fatalf("no warm phase total in the report:\n%s", out)
	}
	if _, err := fmt.Sscanf(line, "%d requests per hour; %d if every call started from empty state", &warm, &cold); err != nil {
		t.Fatalf("warm phase total %q: %v", line, err)
	}
	return warm, cold
}

// TestConformanceBrokenModules: each deliberate bug fails the run, naming
// its rule and only that rule, and the token never shows in the report, in
// any form the host searches for.
func TestConformanceBrokenModules(t *testing.T) {
	broken := conformancetest.Module(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	tests := []struct {
		bug, rule, evidence string
		// spec is appended to the test spec.
		spec string
		// module and env, when set, replace the broken simcloud module
		// and its cloud.
		module string
		env    func(testing.TB) (config, spec string)
	}{
		{"false-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 500 (request 1 of 1)\n     InstanceExists answered false", "", "", nil},
		{"plain-429", conformance.RuleRetryAfter, "-> 429 (51 bytes) [injected: 429+Retry-After]", "", "", nil},
		{"duplicate-lb", conformance.RuleLBIdempotent, "sent create-like requests (POST /v1/loadbalancers): a duplicate", "", "", nil},
		{"logs-token", conformance.RuleNoCredentialLeak, "log line info: checked node-1 with token " + strings.Repeat("*", len(conformancetest.Token)), "", "", nil},
		// Encoded, the token is found as the host finds it in answers.
		{"logs-token-hex", conformance.RuleNoCredentialLeak, "log line info: checked node-1 with token " + strings.Repeat("*", 2*len(conformancetest.Token)) + "0a", "", "", nil},
		{"address-token-base64", conformance.RuleNoCredentialLeak, `first: the result of InstanceMetadata: {"ProviderID":"simcloud://`, "", "", nil},
		{"gone-from-kept", conformance.RuleGoneConfirmed, "InstanceExists answered false without asking the cloud in that call", "", "", nil},
		{"gone-on-403", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 403 (request 1 of 1)\n     InstanceExists answered false", "", "", nil},
		{"second-request", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 500 (request 2 of 2)\n     InstanceExists answered false", "", "", nil},
		{"shutdown-on-error", conformance.RuleNeverShutdownOnDoubt, "InstanceShutdown answered true, which taints the Node as shut down", "", "", nil},
		{"notfound-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceMetadata(node-1) under 500 (request 1 of 1)\n     InstanceMetadata answered NotFound", "", "", nil},
		{"zone-notfound-on-error", conformance.RuleNeverGoneOnDoubt, "GetZoneByProviderID(node-1) under 500 (request 1 of 1)\n     GetZoneByProviderID answered NotFound", "", "", nil},
		{"lb-gone-on-error", conformance.RuleNeverGoneOnDoubt, "GetLoadBalancer answered exists=false for a load balancer that exists", "", "", nil},
		{"lb-delete-unconfirmed", conformance.RuleLBDeleteConfirmed, "EnsureLoadBalancerDeleted reported success, though the cloud never confirmed a delete", "", "", nil},
		{"routes-partial", conformance.RuleRoutesCompleteOnDoubt, "ListRoutes answered without the route for 10.244.250.0/24", "", "", nil},
		{"route-delete-unconfirmed", conformance.RuleRouteDeleteConfirmed, "DeleteRoute reported success, though the cloud never confirmed a delete", "", "", nil},
		{"lb-create-on-error", conformance.RuleLBIdempotent, "sent create-like requests under a fault (POST /v1/loadbalancers): a duplicate", "", "", nil},
		{"v1-gone-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceExistsByProviderID(node-1) under 500 (request 1 of 1)\n     InstanceExistsByProviderID answered false", "", "", nil},
		{"instanceid-notfound-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceID(node-1) under 500 (request 1 of 1)\n     InstanceID answered NotFound", "", "", nil},
		{"list-any-cluster", conformance.RuleLBListOwn, "which EnsureLoadBalancer made for cluster kubernetes-other", "", "", nil},
		{"list-prefix", conformance.RuleLBListOwn, "which EnsureLoadBalancer made for cluster kubernetes-other", "", "", nil},
		{"list-short-on-error", conformance.RuleLBListComplete, "ListLoadBalancers under 500 (request 1 of 1)\n     ListLoadBalancers answered 0 load balancers, without", "", "", nil},
		{"gone-from-snapshot", conformance.RuleGoneConfirmed, "InstanceExists answered false without asking the cloud in that call", "", "", nil},
		{"partial-kept", conformance.RuleGoneConfirmed, "under 500 (request 1 of 1) kept its state\n     InstanceExists answered false for an instance that exists, from what the faulted call before it kept", "", "", nil},
		{"list-untagged", conformance.RuleLBListOwn, "which the test spec lists as foreign (loadBalancer.list.foreign): the orphan sweep would delete it", "", "", nil},
		{"lb-recreate-on-update", conformance.RuleLBPreserved, "UpdateLoadBalancer of an existing load balancer under a fault removed or replaced it (its ingress changed from ", "", "", nil},
		{"overrun", conformance.RuleCallDeadline, "EnsureLoadBalancer had no answer of its own 100ms before its 2s call timeout (it ran ", "slowCloud: {callTimeout: 2s}\n", "", nil},
		{"query-recreate-on-error", conformance.RuleLBPreserved, "EnsureLoadBalancer of an existing load balancer under a fault removed or replaced it (it sent requests the test spec names destructive: POST ", "",
			"../../internal/conformance/testdata/brokenquery", conformancetest.AWS},
	}
	for _, tt := range tests {
		t.Run(tt.bug, func(t *testing.T) {
			t.Parallel() // each has its own cloud
			creds := ""
			if strings.Contains(tt.bug, "token") {
				creds = ", readable: [token]" // the leak needs the token in the module
			}
			module := broken
			var config, spec string
			if tt.module != "" {
				module = conformancetest.Module(t, tt.module, wasmbuild.Go)
				config, spec = tt.env(t)
			} else {
				config, spec = conformancetest.Simcloud(t, `, bug: `+tt.bug, creds)
			}
			if tt.spec != "" {
				specYAML, _ := os.ReadFile(spec)
				os.WriteFile(spec, append(specYAML, tt.spec...), 0o600)
			}
			junit := filepath.Join(t.TempDir(), "report.xml")
			code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, "-junit", junit, module)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, "FAILED rules: "+tt.rule+"\n") {
				t.Errorf("want only rule %s to fail:\n%s", tt.rule, out)
			}
			if !strings.Contains(out, tt.evidence) {
				t.Errorf("report lacks %q:\n%s", tt.evidence, out)
			}
			data, _ := os.ReadFile(junit)
			if !strings.Contains(string(data), `<failure message=`) || !strings.Contains(string(data), `type="`+tt.rule+`"`) {
				t.Errorf("JUnit report has no %s failure", tt.rule)
			}
			if token := credentials.NewSecretSet(conformancetest.Token); token.Holds(out) || token.Holds(string(data)) {
				t.Error("the report shows the token")
			}
			if tt.bug == "logs-token" && !strings.Contains(out, "weakens isolation): token\n") {
				t.Errorf("the report does not name the credential read raw:\n%s", out)
			}
		})
	}
}

// TestConformanceQueryAPI: a provider for a query-style API, built from the
// docs (rest.Request's Form, a snapshot paged by token), passes: among
// others, its InstanceExists falls back to a read by ID when a fault
// breaks the listing, and the cloud's 404 to that read, which names the
// instance only in its form body, is the cloud's word that it is gone.
func TestConformanceQueryAPI(t *testing.T) {
	t.Parallel() // its own cloud
	config, spec := conformancetest.QueryAPI(t)
	code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, conformancetest.Module(t, "../../internal/conformance/testdata/queryapi", wasmbuild.Go))
	if code != 0 || !strings.HasSuffix(out, "PASS\n") || !strings.Contains(out, "ok   faults               InstanceExists(deleted) under 500\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestConformanceSlowCloud: in slow-cloud mode, against a cloud whose new
// load balancers take longer than the call timeout to become active, the
// digitalocean module, which answers RetryAfter rather than poll, passes,
// with each toolchain: the suite calls again after RetryAfter, as the
// service controller does. (The broken module "overrun", which polls past
// its deadline, fails the same mode in TestConformanceBrokenModules.)
func TestConformanceSlowCloud(t *testing.T) {
	tcs, err := wasmbuild.Toolchains()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tcs {
		t.Run(string(tc), func(t *testing.T) {
			t.Parallel() // each has its own cloud
			config, spec := conformancetest.SlowDigitalOcean(t)
			code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, conformancetest.Module(t, "../../modules/digitalocean/module", tc))
			if code != 0 || !strings.HasSuffix(out, "PASS\n") {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, "EnsureLoadBalancer creates (called ") {
				t.Errorf("the suite did not call EnsureLoadBalancer again after RetryAfter:\n%s", out)
			}
			if !strings.Contains(out, "ok   "+conformance.RuleCallDeadline) || !strings.Contains(out, "before their 4s deadline") {
				t.Errorf("no passed %s check at the slow cloud's 4s call timeout:\n%s", conformance.RuleCallDeadline, out)
			}
		})
	}
}

// TestConformanceRateLimitedCloud: with default flags, the simcloud module
// passes against a cloud that allows 20 requests a second (and answers
// 429 with Retry-After beyond), and with limited credentials, a second
// token the cloud refuses with 403 for everything but reads.
func TestConformanceRateLimitedCloud(t *testing.T) {
	t.Parallel() // it mostly waits on the pace, while the other runs compute
	const limitedToken = "read-only-token-9876"
	var mu sync.Mutex
	tokens, last := 20.0, time.Now()
	var throttled, refused int
	config, spec := conformancetest.SimcloudWith(t, "", "", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			now := time.Now()
			tokens = min(20, tokens+now.Sub(last).Seconds()*20)
			last = now
			ok := tokens >= 1
			if ok {
				tokens--
			} else {
				throttled++
			}
			mu.Unlock()
			if !ok {
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"error":"rate_limited"}`, http.StatusTooManyRequests)
				return
			}
			if r.Header.Get("Authorization") == "Bearer "+limitedToken {
				if r.Method == "GET" {
					r.Header.Set("Authorization", "Bearer "+conformancetest.Token)
				} else {
					mu.Lock()
					refused++
					mu.Unlock()
					http.Error(w, `{"error":"forbidden: read-only token"}`, http.StatusForbidden)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	limited := filepath.Join(filepath.Dir(spec), "read-only")
	os.Mkdir(limited, 0o700)
	os.WriteFile(filepath.Join(limited, "token"), []byte(limitedToken), 0o600)
	specYAML, _ := os.ReadFile(spec)
	// The warm phase, paced too, would only lengthen the run.
	os.WriteFile(spec, append(specYAML, "limitedCredentials: {dir: read-only}\nwarm: {skip: true}\n"...), 0o600)

	start := time.Now()
	code, out, errOut := runCLI(t, "", "test", "-config", config, "-spec", spec, conformancetest.Module(t, "../../modules/simcloud/module", wasmbuild.Go))
	t.Logf("%s at the default rate; the cloud answered 429 %d times and 403 %d times", time.Since(start).Round(time.Millisecond), throttled, refused)
	if code != 0 || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"ok   " + conformance.RuleLimitedCredential + "   InstanceExists with the limited credentials (node-1)",
		"ok   " + conformance.RuleLimitedCredential + "   EnsureLoadBalancerDeleted with the limited credentials"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if refused == 0 {
		t.Error("the limited credentials were never refused")
	}
	if strings.Contains(out, limitedToken) {
		t.Error("the report shows the limited token")
	}

	// Unpaced, the run meets the cloud's limit: its 429s are waited out
	// and reported, and fail nothing.
	start = time.Now()
	code, out, errOut = runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, conformancetest.Module(t, "../../modules/simcloud/module", wasmbuild.Go))
	t.Logf("%s unpaced; the cloud answered 429 %d times in all", time.Since(start).Round(time.Millisecond), throttled)
	if code != 0 || !strings.HasSuffix(out, "PASS\n") || !strings.Contains(out, "the cloud answered 429 (its own rate limit) ") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
