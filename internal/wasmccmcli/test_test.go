package wasmccmcli

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

const simToken = "sim-token-0123456789"

// simcloudEnv starts the simulated cloud with two instances and writes a
// cloud-config granting the module its origin and token, and a test spec
// naming both instances and a missing one. extra is appended to
// providerConfig, creds to credentials.
func simcloudEnv(t *testing.T, extra, creds string) (config, spec string) {
	t.Helper()
	return simcloudEnvWith(t, extra, creds, nil)
}

// simcloudEnvWith is simcloudEnv with the cloud's handler wrapped by wrap.
func simcloudEnvWith(t *testing.T, extra, creds string, wrap func(http.Handler) http.Handler) (config, spec string) {
	t.Helper()
	cloud := simcloud.New(simcloud.Options{Token: simToken, Instances: []simcloud.Instance{
		{ID: "i-0001", Name: "node-1", Zone: "zone-a", Region: "region-1", Type: "small", State: simcloud.StateRunning,
			Addresses: []simcloud.Address{{Type: simcloud.AddressInternalIP, Address: "10.0.0.1"}}},
		{ID: "i-0002", Name: "node-2", Zone: "zone-b", Region: "region-1", Type: "small", State: simcloud.StateRunning,
			Addresses: []simcloud.Address{{Type: simcloud.AddressInternalIP, Address: "10.0.0.2"}}},
		{ID: "i-0003", Name: "node-3", Zone: "zone-a", Region: "region-1", Type: "small", State: simcloud.StateStopped},
	}})
	// Load balancers that are not the cluster's: one made by hand, one
	// tagged with the cluster but no Service UID (an older module's).
	for _, lb := range []simcloud.LoadBalancer{{Name: "by-hand"}, {Name: "older-module", Tags: map[string]string{"wasmccm.io/cluster": "kubernetes"}}} {
		lb.Ports = []simcloud.Port{{Protocol: "TCP", Port: 80, NodePort: 30080}}
		if _, err := cloud.CreateLoadBalancer(lb); err != nil {
			t.Fatal(err)
		}
	}
	handler := cloud.Handler()
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return conformanceFiles(t, srv.URL, `{endpoint: "`+srv.URL+`"`+extra+`}`, creds, `nodes:
- {name: node-1, providerID: "simcloud://i-0001", exists: true, instanceType: small, zone: zone-a, region: region-1, shutdown: false}
- {name: node-2, exists: true}
- {name: node-3, providerID: "simcloud://i-0003", exists: true, lookupByName: true, shutdown: true}
- {name: deleted, providerID: "simcloud://i-0099", exists: false}
- {name: foreign, providerID: "aws:///eu-west-1a/i-0123", expectError: Error}
loadBalancer: {list: {foreign: [by-hand, older-module]}}
`)
}

// hcloudEnv starts the fake Hetzner Cloud API with a network and two
// servers on it, and writes the files as simcloudEnv does.
func hcloudEnv(t *testing.T) (config, spec string) {
	t.Helper()
	cloud := hcloudfake.New(hcloudfake.Options{Token: simToken})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	network, err := cloud.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	// A page of other servers first, so that the Nodes' servers are on
	// page 2 of a listing, and faults on page 2 are injected.
	for i := range 50 {
		if _, err := cloud.AddServer(hcloudfake.Server{Name: fmt.Sprintf("other-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	spec = "nodes:\n"
	for _, s := range []hcloudfake.Server{{Name: "node-1", Location: "fsn1", Network: network.ID}, {Name: "node-2", Location: "nbg1", Network: network.ID},
		{Name: "node-3", Location: "fsn1", Network: network.ID, Status: "off"}} {
		got, err := cloud.AddServer(s)
		if err != nil {
			t.Fatal(err)
		}
		spec += fmt.Sprintf("- {name: %s, providerID: \"hcloud://%d\", exists: true, region: %s, lookupByName: true, shutdown: %v, addresses: [{type: InternalIP, address: %s}]}\n",
			s.Name, got.ID, s.Location, s.Status == "off", got.PrivateNet[0].IP)
	}
	spec += "- {name: deleted, providerID: \"hcloud://999999\", exists: false}\n"
	spec += "- {name: foreign, providerID: \"aws:///eu-west-1a/i-0123\", expectError: Error}\n"
	// Load balancers that are not the cluster's: one made by hand, one of
	// the official CCM's (a Service UID, no cluster label). With the test
	// one, 51 of the cluster's make a listing of two pages.
	if _, err := cloud.AddLoadBalancer("by-hand", "fsn1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.AddLoadBalancer("official-ccm", "fsn1", map[string]string{"hcloud-ccm/service-uid": "u-official"}); err != nil {
		t.Fatal(err)
	}
	spec += "loadBalancer: {list: {seed: 50, foreign: [by-hand, official-ccm]}}\n"
	// Hetzner Cloud allows 3,600 requests an hour per project. Half the
	// default warm period: the Go module's listings are slow to parse.
	spec += "rateLimit: {perHour: 3600}\nwarm: {period: 5m}\n"
	return conformanceFiles(t, srv.URL, `{endpoint: "`+srv.URL+`/v1", network: k8s, loadBalancers: {location: fsn1}}`, "", spec)
}

// doEnv starts the fake DigitalOcean API with a page of other droplets
// and the Nodes' droplets (two active, one off), and writes the files as
// simcloudEnv does.
func doEnv(t *testing.T) (config, spec string) {
	t.Helper()
	cloud := dofake.New(dofake.Options{Token: simToken})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	// A page of other droplets first, so that the Nodes' droplets are on
	// page 2 of a listing, and faults on page 2 are injected.
	for i := range 50 {
		if _, err := cloud.AddDroplet(dofake.Droplet{Name: fmt.Sprintf("other-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	spec = "nodes:\n"
	for _, d := range []dofake.Droplet{{Name: "node-1", Region: "fra1"}, {Name: "node-2", Region: "ams3"}, {Name: "node-3", Region: "fra1", Status: "off"}} {
		got, err := cloud.AddDroplet(d)
		if err != nil {
			t.Fatal(err)
		}
		private, _ := got.PrivateIPv4()
		public, _ := got.PublicIPv4()
		spec += fmt.Sprintf("- {name: %s, providerID: \"digitalocean://%d\", exists: true, instanceType: %s, region: %s, lookupByName: true, shutdown: %v, addresses: [{type: InternalIP, address: %s}, {type: ExternalIP, address: %s}]}\n",
			d.Name, got.ID, got.SizeSlug, d.Region, d.Status == "off", private, public)
	}
	spec += "- {name: deleted, providerID: \"digitalocean://999999\", exists: false}\n"
	spec += "- {name: foreign, providerID: \"aws:///eu-west-1a/i-0123\", expectError: Error}\n"
	// Load balancers that are not the cluster's: one made by hand, one
	// of the official CCM's (its cluster ID tag, no Service UID). With the
	// test one, 51 of the cluster's make a listing of two pages.
	for name, tags := range map[string][]string{"by-hand": nil, "official-ccm": {"k8s:c1"}} {
		if _, err := cloud.AddLoadBalancer(name, tags); err != nil {
			t.Fatal(err)
		}
	}
	spec += "loadBalancer: {list: {seed: 50, foreign: [by-hand, official-ccm]}}\n"
	// DigitalOcean allows 5,000 requests an hour per token.
	spec += "rateLimit: {perHour: 5000}\nwarm: {period: 5m}\n"
	return conformanceFiles(t, srv.URL, `{endpoint: "`+srv.URL+`", region: fra1}`, "", spec)
}

// awsEnv starts the fake EC2 API with the cluster's route table, a page
// of other instances, and the Nodes' instances: running, running, stopped
// and terminated.
func awsEnv(t *testing.T) (config, spec string) {
	t.Helper()
	cloud := awsfake.New(awsfake.Options{})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	tags := map[string]string{"kubernetes.io/cluster/c1": "owned"}
	if _, err := cloud.AddRouteTable("", tags); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := cloud.AddInstance(awsfake.Instance{Tags: map[string]string{"kubernetes.io/cluster/other": "owned"}}); err != nil {
			t.Fatal(err)
		}
	}
	spec = "nodes:\n"
	for _, state := range []string{"running", "running", "stopped", "terminated"} {
		in, err := cloud.AddInstance(awsfake.Instance{Type: "m5.large", Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		if state != "running" {
			if err := cloud.SetInstanceState(in.ID, state); err != nil {
				t.Fatal(err)
			}
		}
		providerID := "aws:///" + in.Zone + "/" + in.ID
		if state == "terminated" {
			spec += fmt.Sprintf("- {name: %s, providerID: %q, exists: false}\n", in.PrivateDNSName, providerID)
			continue
		}
		spec += fmt.Sprintf("- {name: %s, providerID: %q, exists: true, instanceType: m5.large, zone: %s, region: us-east-1, lookupByName: true, shutdown: %v, addresses: [{type: InternalIP, address: %s}]}\n",
			in.PrivateDNSName, providerID, in.Zone, state == "stopped", in.PrivateIP)
	}
	spec += "- {name: deleted, providerID: \"aws:///us-east-1a/i-0000000000000dead\", exists: false}\n"
	spec += "- {name: foreign, providerID: \"hcloud://1\", expectError: Error}\n"
	// Load balancers the module did not make, created with the official
	// client: one by hand, without tags, and one as the official CCM
	// tags it, with the cluster but no Service UID.
	client := elb.NewFromConfig(aws.Config{Region: awsfake.DefaultRegion, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider(awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, "")})
	for name, lbTags := range map[string]map[string]string{"by-hand": nil, "official-ccm": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "default/web"}} {
		in := &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String(name), AvailabilityZones: []string{awsfake.DefaultRegion + "a"},
			Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 80, InstancePort: aws.Int32(30080)}}}
		for k, v := range lbTags {
			in.Tags = append(in.Tags, elbtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if _, err := client.CreateLoadBalancer(context.Background(), in); err != nil {
			t.Fatalf("creating load balancer %s: %v", name, err)
		}
	}
	// With the test one, 21 of the cluster's load balancers: their tags
	// take two DescribeTags. The other cluster is another clusterID.
	spec += `loadBalancer: {list: {seed: 20, foreign: [by-hand, official-ccm], otherCluster: {providerConfig: {region: us-east-1, clusterID: c2, ec2Endpoint: "` + srv.URL + `", elbEndpoint: "` + srv.URL + `"}}}}` + "\n"
	auth := `{name: aws, origins: ["` + srv.URL + `"], sigv4: {accessKeyIDKey: aws-access-key-id, secretAccessKeyKey: aws-secret-access-key}}`
	return conformanceFilesWith(t, srv.URL, auth, `{region: us-east-1, clusterID: c1, ec2Endpoint: "`+srv.URL+`", elbEndpoint: "`+srv.URL+`"}`, "", spec)
}

// conformanceFiles writes a cloud-config granting the cloud's origin and
// binding the token to it, with providerConfig and creds added to
// credentials, and the test spec.
func conformanceFiles(t *testing.T, origin, providerConfig, creds, specYAML string) (config, spec string) {
	return conformanceFilesWith(t, origin, `{name: token, origins: ["`+origin+`"], bearer: {key: token}}`, providerConfig, creds, specYAML)
}

// conformanceFilesWith is conformanceFiles with the credentials.auth
// entry auth. The credentials directory holds token (the fakes' token)
// and the AWS fake's access key pair as aws-access-key-id and
// aws-secret-access-key.
func conformanceFilesWith(t *testing.T, origin, auth, providerConfig, creds, specYAML string) (config, spec string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	os.Mkdir(filepath.Join(dir, "credentials"), 0o700)
	write("credentials/token", simToken+"\n")
	write("credentials/aws-access-key-id", awsfake.DefaultAccessKeyID)
	write("credentials/aws-secret-access-key", awsfake.DefaultSecretAccessKey)
	config = write("cloud-config.yaml", `module: {path: unused.wasm, compilationCacheDir: `+compilationCache+`}
http: {allowedOrigins: ["`+origin+`"]}
credentials: {dir: `+filepath.Join(dir, "credentials")+`, auth: [`+auth+`]`+creds+`}
providerConfig: `+providerConfig+`
`)
	return config, write("test-spec.yaml", specYAML)
}

// compilationCache is the compilation cache the provider tests and the
// end-to-end suite's CCMs use too: each test module is compiled once per
// content and wazero version, not once per test process.
var compilationCache = filepath.Join(wasmbuild.CacheDir(), "compilation")

func buildModule(t *testing.T, dir string, tc wasmbuild.Toolchain) string {
	t.Helper()
	path, err := wasmbuild.Build(dir, tc)
	if err != nil {
		t.Fatal(err)
	}
	return path
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
		env  func(*testing.T) (config, spec string)
		// snapshot: the module keeps a snapshot of the cloud's
		// instances, so its warm phase costs far fewer requests than
		// its cold calls would.
		snapshot bool
	}{
		{name: "simcloud", env: func(t *testing.T) (string, string) { return simcloudEnv(t, "", "") }, snapshot: true},
		{name: "hcloud", env: hcloudEnv, snapshot: true},
		{name: "aws", env: awsEnv},
		{name: "digitalocean", env: doEnv, snapshot: true},
	}
	for _, m := range modules {
		for _, tc := range tcs {
			t.Run(m.name+"/"+string(tc), func(t *testing.T) {
				config, spec := m.env(t)
				junit := filepath.Join(t.TempDir(), "report.xml")
				code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, "-junit", junit, buildModule(t, "../../modules/"+m.name+"/module", tc))
				if code != 0 || !strings.HasSuffix(out, "PASS\n") {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				for _, rule := range []string{conformance.RuleCapabilities, conformance.RuleInstances, conformance.RuleNoCredentialLeak,
					conformance.FaultChecks, conformance.RuleLBLifecycle, conformance.RuleLBIdempotent} {
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
// its rule and only that rule, and the token never shows in the report.
func TestConformanceBrokenModules(t *testing.T) {
	broken := buildModule(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	tests := []struct {
		bug, rule, evidence string
	}{
		{"false-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 500 (request 1 of 1)\n     InstanceExists answered false"},
		{"plain-429", conformance.RuleRetryAfter, "-> 429 (51 bytes) [injected: 429+Retry-After]"},
		{"duplicate-lb", conformance.RuleLBIdempotent, "sent create-like requests (POST /v1/loadbalancers): a duplicate"},
		{"logs-token", conformance.RuleNoCredentialLeak, "log line info: checked node-1 with token [REDACTED]"},
		{"gone-from-kept", conformance.RuleGoneConfirmed, "InstanceExists answered false without asking the cloud in that call"},
		{"gone-on-403", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 403 (request 1 of 1)\n     InstanceExists answered false"},
		{"second-request", conformance.RuleNeverGoneOnDoubt, "InstanceExists(node-1) under 500 (request 2 of 2)\n     InstanceExists answered false"},
		{"shutdown-on-error", conformance.RuleNeverShutdownOnDoubt, "InstanceShutdown answered true, which taints the Node as shut down"},
		{"notfound-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceMetadata(node-1) under 500 (request 1 of 1)\n     InstanceMetadata answered NotFound"},
		{"zone-notfound-on-error", conformance.RuleNeverGoneOnDoubt, "GetZoneByProviderID(node-1) under 500 (request 1 of 1)\n     GetZoneByProviderID answered NotFound"},
		{"lb-gone-on-error", conformance.RuleNeverGoneOnDoubt, "GetLoadBalancer answered exists=false for a load balancer that exists"},
		{"lb-delete-unconfirmed", conformance.RuleLBDeleteConfirmed, "EnsureLoadBalancerDeleted reported success, though the cloud never confirmed a delete"},
		{"routes-partial", conformance.RuleRoutesCompleteOnDoubt, "ListRoutes answered without the route for 10.244.250.0/24"},
		{"route-delete-unconfirmed", conformance.RuleRouteDeleteConfirmed, "DeleteRoute reported success, though the cloud never confirmed a delete"},
		{"lb-create-on-error", conformance.RuleLBIdempotent, "sent create-like requests under a fault (POST /v1/loadbalancers): a duplicate"},
		{"v1-gone-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceExistsByProviderID(node-1) under 500 (request 1 of 1)\n     InstanceExistsByProviderID answered false"},
		{"instanceid-notfound-on-error", conformance.RuleNeverGoneOnDoubt, "InstanceID(node-1) under 500 (request 1 of 1)\n     InstanceID answered NotFound"},
		{"list-any-cluster", conformance.RuleLBListOwn, "which EnsureLoadBalancer made for cluster wasmccm-conformance-other"},
		{"list-short-on-error", conformance.RuleLBListComplete, "ListLoadBalancers under 500 (request 1 of 1)\n     ListLoadBalancers answered 0 load balancers, without"},
		{"gone-from-snapshot", conformance.RuleGoneConfirmed, "InstanceExists answered false without asking the cloud in that call"},
		{"partial-kept", conformance.RuleGoneConfirmed, "under 500 (request 1 of 1) kept its state\n     InstanceExists answered false for an instance that exists, from what the faulted call before it kept"},
		{"list-untagged", conformance.RuleLBListOwn, "which the test spec lists as foreign (loadBalancer.list.foreign): the orphan sweep would delete it"},
	}
	for _, tt := range tests {
		t.Run(tt.bug, func(t *testing.T) {
			t.Parallel() // each has its own cloud
			creds := ""
			if tt.bug == "logs-token" {
				creds = ", readable: [token]" // the leak needs the token in the module
			}
			config, spec := simcloudEnv(t, `, bug: `+tt.bug, creds)
			junit := filepath.Join(t.TempDir(), "report.xml")
			code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, "-junit", junit, broken)
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
			if strings.Contains(out, simToken) || strings.Contains(string(data), simToken) {
				t.Error("the report shows the token")
			}
			if tt.bug == "logs-token" && !strings.Contains(out, "weakens isolation): token\n") {
				t.Errorf("the report does not name the credential read raw:\n%s", out)
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
	config, spec := simcloudEnvWith(t, "", "", func(next http.Handler) http.Handler {
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
					r.Header.Set("Authorization", "Bearer "+simToken)
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
	code, out, errOut := runCLI(t, "", "test", "-config", config, "-spec", spec, buildModule(t, "../../modules/simcloud/module", wasmbuild.Go))
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
	code, out, errOut = runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, buildModule(t, "../../modules/simcloud/module", wasmbuild.Go))
	t.Logf("%s unpaced; the cloud answered 429 %d times in all", time.Since(start).Round(time.Millisecond), throttled)
	if code != 0 || !strings.HasSuffix(out, "PASS\n") || !strings.Contains(out, "the cloud answered 429 (its own rate limit) ") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestRawReadsOffByDefault: the module that logs the token it reads, run
// without credentials.readable, gets "not granted", leaks nothing and
// passes every rule.
func TestRawReadsOffByDefault(t *testing.T) {
	config, spec := simcloudEnv(t, `, bug: logs-token`, "")
	code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, buildModule(t, "../../internal/conformance/testdata/broken", wasmbuild.Go))
	if code != 0 || !strings.Contains(out, "no credential read raw\n") || strings.Contains(out, simToken) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestOptionalExportsShown: validate, test and call -trace show the
// lister next to the capabilities, and call of an optional export the
// module lacks says so and what it has.
func TestOptionalExportsShown(t *testing.T) {
	config, spec := simcloudEnv(t, "", "")
	broken := buildModule(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	code, out, errOut := runCLI(t, "", "validate", broken)
	if code != 0 || !strings.Contains(out, "\noptional:     ListLoadBalancers\n") {
		t.Errorf("validate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, broken)
	if code != 0 || !strings.Contains(out, "module validates: capabilities InstancesV2, Instances, LoadBalancer, Routes, Zones; optional exports ListLoadBalancers\n") {
		t.Errorf("test: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "call", "-trace", "-config", config, broken, "GetLoadBalancerName")
	if code != 0 || !strings.Contains(errOut, "trace: module capabilities InstancesV2, Instances, LoadBalancer, Routes, Zones; optional exports ListLoadBalancers\n") {
		t.Errorf("call -trace: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, `"kubernetes"`, "call", testprovider(t), "ListLoadBalancers")
	if code != 1 || !strings.Contains(errOut, "the module does not export wasmccm_list_load_balancers (ListLoadBalancers), which is optional; its optional exports: none") {
		t.Errorf("call of a missing optional export: exit %d\n%s", code, errOut)
	}
}

// TestCallTrace: call -trace shows each request and log line of the call,
// with the token redacted, and leaves the JSON answer alone on stdout.
func TestCallTrace(t *testing.T) {
	config, _ := simcloudEnv(t, `, bug: logs-token`, ", readable: [token]")
	broken := buildModule(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	code, out, errOut := runCLI(t, `{"Name":"node-1","ProviderID":"simcloud://i-0001"}`, "call", "-trace", "-config", config, broken, "InstanceExists")
	if code != 0 || out != "true\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	for _, want := range []string{"trace: http GET http://127.0.0.1:", "/v1/instances -> 200 (", "trace: log info: checked node-1 with token [REDACTED]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("trace lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, simToken) {
		t.Errorf("trace shows the token:\n%s", errOut)
	}
}
