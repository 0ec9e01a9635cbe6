// Package conformancetest sets up what the tests of `wasmccm test` run
// against: each first-party fake cloud (simcloud, hcloudfake, dofake,
// awsfake) started in-process and seeded with the instances and load
// balancers a test spec names, the cloud-config granting a module that
// cloud and its credentials, the test spec itself, and the module built
// from source (internal/wasmbuild, cached by content). The command's unit
// tests (internal/wasmccmcli) and the full conformance runs (test/conformance)
// share it.
package conformancetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// Token is the bearer token every fake cloud here accepts, written to the
// credentials directory as "token".
const Token = "sim-token-0123456789"

// Simcloud starts the simulated cloud with two instances and writes a
// cloud-config granting the module its origin and token, and a test spec
// naming both instances and a missing one. extra is appended to
// providerConfig, creds to credentials.
func Simcloud(t testing.TB, extra, creds string) (config, spec string) {
	t.Helper()
	return SimcloudWith(t, extra, creds, nil)
}

// SimcloudWith is Simcloud with the cloud's handler wrapped by wrap.
func SimcloudWith(t testing.TB, extra, creds string, wrap func(http.Handler) http.Handler) (config, spec string) {
	t.Helper()
	cloud := simcloud.New(simcloud.Options{Token: Token, Instances: []simcloud.Instance{
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
	return files(t, srv.URL, `{endpoint: "`+srv.URL+`"`+extra+`}`, creds, `nodes:
- {name: node-1, providerID: "simcloud://i-0001", exists: true, instanceType: small, zone: zone-a, region: region-1, shutdown: false}
- {name: node-2, exists: true}
- {name: node-3, providerID: "simcloud://i-0003", exists: true, lookupByName: true, shutdown: true}
- {name: deleted, providerID: "simcloud://i-0099", exists: false}
- {name: foreign, providerID: "aws:///eu-west-1a/i-0123", expectError: Error}
loadBalancer: {list: {foreign: [by-hand, older-module]}, destructive: [{method: DELETE, path: "/v1/loadbalancers/*"}]}
`)
}

// Hcloud starts the fake Hetzner Cloud API with a network and two
// servers on it, and writes the files as Simcloud does.
func Hcloud(t testing.TB) (config, spec string) {
	t.Helper()
	cloud := hcloudfake.New(hcloudfake.Options{Token: Token})
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
	spec += `loadBalancer: {list: {seed: 50, foreign: [by-hand, official-ccm]}, destructive: [{method: DELETE, path: "/v1/load_balancers/*"}]}` + "\n"
	// Hetzner Cloud allows 3,600 requests an hour per project. Half the
	// default warm period: the Go module's listings are slow to parse.
	spec += "rateLimit: {perHour: 3600}\nwarm: {period: 5m}\n"
	return files(t, srv.URL, `{endpoint: "`+srv.URL+`/v1", network: k8s, loadBalancers: {location: fsn1}}`, "", spec)
}

// DigitalOcean starts the fake DigitalOcean API with a page of other droplets
// and the Nodes' droplets (two active, one off), and writes the files as
// Simcloud does.
func DigitalOcean(t testing.TB) (config, spec string) {
	t.Helper()
	return digitalOcean(t, 0, `loadBalancer: {list: {seed: 50, foreign: [by-hand, official-ccm]}, destructive: [{method: DELETE, path: "/v2/load_balancers/*"}]}
rateLimit: {perHour: 5000}
warm: {period: 5m}
`)
}

// SlowDigitalOcean is DigitalOcean as a slow cloud: a new load balancer
// stays "new" for 5 s, longer than the 4 s call timeout of the spec's
// slow-cloud mode (which leaves a loaded test machine room for the other
// calls). The suite waits 1 s, not the module's RetryAfter, before
// it calls again; it seeds no other load balancer, each of which would
// wait too, and skips the warm phase.
func SlowDigitalOcean(t testing.TB) (config, spec string) {
	t.Helper()
	return digitalOcean(t, 5*time.Second, `loadBalancer: {list: {seed: 0, foreign: [by-hand, official-ccm]}}
slowCloud: {callTimeout: 4s, retryWait: 1s}
warm: {skip: true}
`)
}

// digitalOcean is DigitalOcean with load balancers "new" for activateAfter
// and the spec's sections after the nodes.
func digitalOcean(t testing.TB, activateAfter time.Duration, specSections string) (config, spec string) {
	t.Helper()
	cloud := dofake.New(dofake.Options{Token: Token, ActivateAfter: activateAfter})
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
	// test one and a seed of 50, 51 of the cluster's make a listing of
	// two pages. DigitalOcean allows 5,000 requests an hour per token.
	for name, tags := range map[string][]string{"by-hand": nil, "official-ccm": {"k8s:c1"}} {
		if _, err := cloud.AddLoadBalancer(name, tags); err != nil {
			t.Fatal(err)
		}
	}
	spec += specSections
	return files(t, srv.URL, `{endpoint: "`+srv.URL+`", region: fra1}`, "", spec)
}

// AWS starts the fake EC2 API with the cluster's route table, a page
// of other instances, and the Nodes' instances: running, running, stopped
// and terminated. Its load balancers are Classic ELBs.
func AWS(t testing.TB) (config, spec string) {
	t.Helper()
	return awsCloud(t, false)
}

// AWSNLB is AWS with the Services annotated for Network Load Balancers,
// the module's ELBv2 path.
func AWSNLB(t testing.TB) (config, spec string) {
	t.Helper()
	return awsCloud(t, true)
}

// awsCloud is AWS, with the Services annotated for NLBs when nlb is set;
// then the test fails at its end unless the module made NLBs only, since
// a run that passed on the Classic path judged nothing of the NLB one.
func awsCloud(t testing.TB, nlb bool) (config, spec string) {
	t.Helper()
	cloud := awsfake.New(awsfake.Options{})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	lb := ""
	if nlb {
		lb = "annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}, "
		t.Cleanup(func() {
			// Two of each are the foreign ones made below.
			made := cloud.Requests()
			if classic, nlbs := made["elasticloadbalancing:CreateLoadBalancer"]-2, made["elbv2:CreateLoadBalancer"]-2; nlbs <= 0 || classic != 0 {
				t.Errorf("the module made %d Classic ELBs and %d NLBs; want only NLBs", classic, nlbs)
			}
		})
	}
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
	// A name no instance has: NotFound, an error to the host, never gone.
	spec += "- {name: ip-10-9-9-9.ec2.internal, expectError: NotFound}\n"
	spec += "- {name: foreign, providerID: \"hcloud://1\", expectError: Error}\n"
	// Load balancers the module did not make, created with the official
	// clients, a Classic ELB and an NLB of each: one by hand, without
	// tags, and one as the official CCM tags it, with the cluster but no
	// Service UID.
	cfg := aws.Config{Region: awsfake.DefaultRegion, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider(awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, "")}
	client, clientV2 := elb.NewFromConfig(cfg), elbv2.NewFromConfig(cfg)
	for name, lbTags := range map[string]map[string]string{"by-hand": nil, "official-ccm": {"kubernetes.io/cluster/c1": "owned", "kubernetes.io/service-name": "default/web"}} {
		in := &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String(name), AvailabilityZones: []string{awsfake.DefaultRegion + "a"},
			Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 80, InstancePort: aws.Int32(30080)}}}
		inV2 := &elbv2.CreateLoadBalancerInput{Name: aws.String(name + "-nlb"), Type: elbv2types.LoadBalancerTypeEnumNetwork, Subnets: []string{cloud.Subnets()[0].ID}}
		for k, v := range lbTags {
			in.Tags = append(in.Tags, elbtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
			inV2.Tags = append(inV2.Tags, elbv2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if _, err := client.CreateLoadBalancer(context.Background(), in); err != nil {
			t.Fatalf("creating load balancer %s: %v", name, err)
		}
		if _, err := clientV2.CreateLoadBalancer(context.Background(), inV2); err != nil {
			t.Fatalf("creating network load balancer %s-nlb: %v", name, err)
		}
	}
	// With the test one, 21 of the cluster's load balancers: their tags
	// take two DescribeTags. The other cluster is another clusterID. An
	// NLB is destroyed in parts too: its listeners and target groups.
	spec += `loadBalancer: {` + lb + `destructive: [{action: DeleteLoadBalancer}, {action: DeleteListener}, {action: DeleteTargetGroup}], list: {seed: 20, foreign: [by-hand, official-ccm, by-hand-nlb, official-ccm-nlb], otherCluster: {providerConfig: {region: us-east-1, clusterID: c2, ec2Endpoint: "` + srv.URL + `", elbEndpoint: "` + srv.URL + `"}}}}` + "\n"
	auth := `{name: aws, origins: ["` + srv.URL + `"], sigv4: {accessKeyIDKey: aws-access-key-id, secretAccessKeyKey: aws-secret-access-key}}`
	return filesWith(t, srv.URL, auth, `{region: us-east-1, clusterID: c1, ec2Endpoint: "`+srv.URL+`", elbEndpoint: "`+srv.URL+`"}`, "", spec)
}

// QueryAPI starts a fake of a query-style API, as testdata/queryapi
// expects: every call POST / with form fields, Action=DescribeInstances
// the only one, a page of MaxResults instances and a NextToken, or, with
// InstanceId.1, that instance or a 404. Its instances are the Nodes'
// (running, running, stopped) and three others.
func QueryAPI(t testing.TB) (config, spec string) {
	t.Helper()
	type instance struct{ InstanceId, Name, InstanceType, Zone, State string }
	instances := []instance{{"i-0001", "other-1", "small", "zone-a", "running"}, {"i-0002", "node-1", "small", "zone-a", "running"},
		{"i-0003", "other-2", "small", "zone-b", "running"}, {"i-0004", "node-2", "large", "zone-b", "running"},
		{"i-0005", "other-3", "small", "zone-a", "running"}, {"i-0006", "node-3", "small", "zone-a", "stopped"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		if r.Header.Get("Authorization") != "Bearer "+Token {
			reply(401, map[string]string{"Error": "AuthFailure"})
			return
		}
		if r.Method != "POST" || r.URL.Path != "/" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.ParseForm() != nil ||
			r.PostForm.Get("Action") != "DescribeInstances" {
			reply(400, map[string]string{"Error": "InvalidAction"})
			return
		}
		if id := r.PostForm.Get("InstanceId.1"); id != "" {
			for _, in := range instances {
				if in.InstanceId == id {
					reply(200, map[string]any{"Instances": []instance{in}})
					return
				}
			}
			reply(404, map[string]string{"Error": "InvalidInstanceID.NotFound"})
			return
		}
		from, _ := strconv.Atoi(strings.TrimPrefix(r.PostForm.Get("NextToken"), "after-"))
		n, _ := strconv.Atoi(r.PostForm.Get("MaxResults"))
		to := min(from+max(n, 1), len(instances))
		page := map[string]any{"Instances": instances[from:to]}
		if to < len(instances) {
			page["NextToken"] = "after-" + strconv.Itoa(to)
		}
		reply(200, page)
	}))
	t.Cleanup(srv.Close)
	return files(t, srv.URL, `{endpoint: "`+srv.URL+`"}`, "", `nodes:
- {name: node-1, providerID: "queryapi://i-0002", exists: true, lookupByName: true, instanceType: small, zone: zone-a, shutdown: false}
- {name: node-2, providerID: "queryapi://i-0004", exists: true, instanceType: large, zone: zone-b}
- {name: node-3, providerID: "queryapi://i-0006", exists: true, lookupByName: true, shutdown: true}
- {name: deleted, providerID: "queryapi://i-0099", exists: false}
- {name: no-such-server, expectError: NotFound}
- {name: foreign, providerID: "aws:///eu-west-1a/i-0123", expectError: Error}
`)
}

// files writes a cloud-config granting the cloud's origin and binding the
// token to it, with providerConfig and creds added to credentials, and the
// test spec.
func files(t testing.TB, origin, providerConfig, creds, specYAML string) (config, spec string) {
	return filesWith(t, origin, `{name: token, origins: ["`+origin+`"], bearer: {key: token}}`, providerConfig, creds, specYAML)
}

// filesWith is files with the credentials.auth entry auth. The credentials
// directory holds token (the fakes' token) and the AWS fake's access key
// pair as aws-access-key-id and aws-secret-access-key.
func filesWith(t testing.TB, origin, auth, providerConfig, creds, specYAML string) (config, spec string) {
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
	write("credentials/token", Token+"\n")
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

// Module builds the main package at pkgDir with tc, or takes it from the
// cache when nothing that goes into it changed, and returns its path.
func Module(t testing.TB, pkgDir string, tc wasmbuild.Toolchain) string {
	t.Helper()
	path, err := wasmbuild.Build(pkgDir, tc)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
