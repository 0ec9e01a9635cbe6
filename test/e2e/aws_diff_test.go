package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/modules/aws"
)

// TestAWSDifferential runs the same cluster twice, once with wasmccm and
// the aws module and once with the official aws-cloud-controller-manager
// binary named by WASMCCM_AWS_CCM, each against a fresh fake EC2 and ELB
// API, and prints what each left on the Nodes, the Services and in the
// cloud, and the requests each made by action, as a Markdown table. It is
// a one-off comparison (modules/aws/README.md says how to build the
// official binary), skipped unless the variable is set.
func TestAWSDifferential(t *testing.T) {
	differential(t, "WASMCCM_AWS_CCM", "wasmccm + aws module", awsDiffRun)
}

// awsDiffCluster starts a differential's cluster under impl: a fresh fake
// EC2, ELB and ELBv2 API with a route table and an instance in each of two
// zones of cluster e2e, the CCM (wasmccm with the aws module, TinyGo when
// there is TinyGo, or the official binary), and the two Nodes,
// initialized.
func awsDiffCluster(t *testing.T, impl, official string) (*awsEnv, awsfake.RouteTable, []awsfake.Instance) {
	fake := awsfake.New(awsfake.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	table, err := fake.AddRouteTable("", awsClusterTags)
	if err != nil {
		t.Fatal(err)
	}
	var instances []awsfake.Instance
	for i := range 2 {
		in, err := fake.AddInstance(awsfake.Instance{Type: "m5.large", Zone: fmt.Sprintf("us-east-1%c", 'a'+i), Tags: awsClusterTags})
		if err != nil {
			t.Fatal(err)
		}
		instances = append(instances, in)
	}
	var e *awsEnv
	if impl == "wasmccm" {
		tc := wasmbuild.Go
		if _, err := wasmbuild.TinyGoPath(); err == nil {
			tc = wasmbuild.TinyGo
		}
		providerConfig := fmt.Sprintf("{region: us-east-1, clusterID: e2e, ec2Endpoint: %q, elbEndpoint: %q}", srv.URL, srv.URL)
		e = &awsEnv{env: startModule(t, awsModule, tc, srv.URL, providerConfig, withSigV4(srv.URL)), fake: fake, routeTable: table.ID}
	} else {
		e = &awsEnv{env: startOfficialAWS(t, official, srv.URL, fake), fake: fake, routeTable: table.ID}
	}
	for i, in := range instances {
		e.registerNode(in.PrivateDNSName, fmt.Sprintf("10.244.%d.0/24", i+1))
	}
	for _, in := range instances {
		e.waitInitialized(t, in.PrivateDNSName)
	}
	return e, table, instances
}

// awsDiffRun plays the scenario under one implementation: two Nodes in two
// zones, three Services (default, internal with attributes and source
// ranges, externalTrafficPolicy Local), routes; then one Service deleted.
func awsDiffRun(t *testing.T, impl, official string) map[string]string {
	e, table, instances := awsDiffCluster(t, impl, official)
	ctx := context.Background()
	local := diffService("local", 8080, 30880, nil)
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	internal := diffService("internal", 443, 30443, map[string]string{
		"service.beta.kubernetes.io/aws-load-balancer-internal":                          "true",
		"service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout":           "120",
		"service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled": "true",
		"service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags":          "team=web",
	})
	internal.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	services := []*v1.Service{diffService("web", 80, 30080, nil), internal, local}
	for _, svc := range services {
		if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress := map[string][]v1.LoadBalancerIngress{}
	// The API server picks the health check node port at random: it is
	// compared by name.
	var healthPort *strings.Replacer
	for _, svc := range services {
		eventually(t, 90*time.Second, "ingress of "+svc.Name, func() (bool, error) {
			s, err := e.getService(svc.Name)
			if err != nil {
				return false, err
			}
			ingress[svc.Name] = s.Status.LoadBalancer.Ingress
			if s.Spec.HealthCheckNodePort != 0 {
				healthPort = strings.NewReplacer(fmt.Sprintf(":%d/", s.Spec.HealthCheckNodePort), ":<healthCheckNodePort>/")
			}
			return len(s.Status.LoadBalancer.Ingress) > 0, nil
		})
	}
	eventually(t, 60*time.Second, "routes", func() (bool, error) {
		return e.routeTarget("10.244.1.0/24") != "" && e.routeTarget("10.244.2.0/24") != "", nil
	})
	// Let the controllers settle: a second sync must change nothing.
	time.Sleep(5 * time.Second)

	out := map[string]string{}
	for _, in := range instances {
		n, err := e.getNode(in.PrivateDNSName)
		if err != nil {
			t.Fatal(err)
		}
		nodeOutcome(out, "node "+in.Zone, n)
	}
	// Load balancers and their groups are named after Service UIDs, which
	// differ between the runs, and group IDs follow the order of creation:
	// both are compared by the Service they serve.
	symbolic := awsSymbols(e.fake)
	for name, in := range ingress {
		out["service "+name+" ingress"] = symbolic.Replace(compact(in))
	}
	for _, lb := range e.fake.LoadBalancers() {
		p := "ELB of " + lb.Tags["kubernetes.io/service-name"] + " "
		out[p+"scheme"] = lb.Scheme
		out[p+"listeners"] = compact(lb.Listeners)
		out[p+"subnets"] = strings.Join(lb.Subnets, ",")
		out[p+"security groups"] = symbolic.Replace(strings.Join(lb.SecurityGroups, ","))
		out[p+"instances"] = strings.Join(slices.Sorted(slices.Values(lb.Instances)), ",")
		out[p+"health check"] = healthPort.Replace(compact(lb.HealthCheck))
		out[p+"tags"] = symbolic.Replace(compact(lb.Tags))
		out[p+"attributes"] = compact(lb.Attributes)
	}
	for _, sg := range e.fake.SecurityGroups() {
		p := "group " + symbolic.Replace(sg.ID) + " "
		// Rules are kept in the order they were authorized: compared as a set.
		var rules []string
		for _, r := range sg.Ingress {
			rules = append(rules, symbolic.Replace(compact(r)))
		}
		slices.Sort(rules)
		out[p+"ingress"] = strings.Join(rules, " ")
		out[p+"tags"] = compact(sg.Tags)
	}
	rt, _ := e.fake.RouteTable(table.ID)
	var routes []string
	for _, r := range rt.Routes {
		if r.InstanceID != "" {
			routes = append(routes, r.DestinationCIDR+" -> "+r.InstanceID)
		}
	}
	slices.Sort(routes)
	out["routes"] = strings.Join(routes, "; ")
	routed, _ := e.fake.Instance(instances[0].ID)
	out["source/dest check of a routed instance"] = fmt.Sprint(!routed.NoSourceDestCheck)

	if err := e.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "Service web deleted", func() (bool, error) {
		_, err := e.getService("web")
		return apierrors.IsNotFound(err), nil
	})
	var left []string
	for _, sg := range e.fake.SecurityGroups() {
		left = append(left, symbolic.Replace(sg.ID))
	}
	out["after deleting web: security groups"] = strings.Join(left, ",")
	out["after deleting web: load balancers"] = fmt.Sprint(len(e.fake.LoadBalancers()))
	awsRequestOutcome(out, e.fake)
	return out
}

// awsRequestOutcome records the requests the fake saw, by action, and the
// reads (Describe*) and writes in all.
func awsRequestOutcome(out map[string]string, fake *awsfake.Cloud) {
	reads, writes := 0, 0
	for action, n := range fake.Requests() {
		out["requests "+action] = fmt.Sprint(n)
		if _, name, _ := strings.Cut(action, ":"); strings.HasPrefix(name, "Describe") {
			reads += n
		} else {
			writes += n
		}
	}
	out["requests, reads (Describe*) in all"] = fmt.Sprint(reads)
	out["requests, writes in all"] = fmt.Sprint(writes)
}

// awsSymbols names load balancers, DNS names, Service UIDs and security
// groups after the Service they serve.
func awsSymbols(fake *awsfake.Cloud) *strings.Replacer {
	var pairs []string
	byLB := map[string]string{}
	for _, lb := range fake.LoadBalancers() {
		svc := "<" + lb.Tags["kubernetes.io/service-name"] + ">"
		byLB[lb.Name] = svc
		pairs = append(pairs, lb.DNSName, "<dns of "+svc+">", lb.Name, svc)
		if uid := lb.Tags[aws.ServiceUIDTag]; uid != "" {
			pairs = append(pairs, uid, "<UID of "+svc+">")
		}
	}
	for _, sg := range fake.SecurityGroups() {
		name := sg.Name
		for lb, svc := range byLB {
			name = strings.ReplaceAll(name, lb, svc)
		}
		pairs = append(pairs, sg.ID, "sg:"+name)
	}
	return strings.NewReplacer(pairs...)
}

// startOfficialAWS starts the official CCM against the fake, configured as
// its documentation says for a controller outside EC2: region, zone, VPC
// and subnet in the cloud-config (so it does not ask the instance metadata
// service), the endpoints through ServiceOverride, keys in its
// environment.
func startOfficialAWS(t *testing.T, binary, cloudURL string, fake *awsfake.Cloud) *env {
	vpc := fake.DefaultVpc()
	subnet := fake.Subnets()[0]
	config := fmt.Sprintf(`[Global]
Region = us-east-1
Zone = %s
VPC = %s
SubnetID = %s
KubernetesClusterID = e2e

[ServiceOverride "ec2"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2

[ServiceOverride "elb"]
Service = Elastic Load Balancing
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = elasticloadbalancing

[ServiceOverride "elbv2"]
Service = Elastic Load Balancing v2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = elasticloadbalancing
`, subnet.Zone, vpc.ID, subnet.ID, cloudURL, cloudURL, cloudURL)
	path := filepath.Join(t.TempDir(), "cloud-config")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return startOfficial(t, binary, cloudURL, map[string]string{
		"AWS_ACCESS_KEY_ID": awsfake.DefaultAccessKeyID, "AWS_SECRET_ACCESS_KEY": awsfake.DefaultSecretAccessKey,
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
	}, "--cloud-provider=aws", "--cloud-config="+path)
}
