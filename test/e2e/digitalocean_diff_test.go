package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/godo"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/scale/requests"
)

// TestDigitalOceanDifferential runs the same cluster twice, once with
// wasmccm and the digitalocean module and once with the official
// digitalocean-cloud-controller-manager binary named by WASMCCM_DO_CCM
// (hack/build-do-ccm.sh builds it), each against a fresh fake DigitalOcean
// API, and prints what each left on the Nodes, the Services and in the
// cloud, and the writes each made, as a Markdown table. Skipped unless the
// variable is set.
func TestDigitalOceanDifferential(t *testing.T) {
	differential(t, "WASMCCM_DO_CCM", "wasmccm + digitalocean module", doDiffRun)
}

// doDiffEnviron configures the official CCM against the fake API at url
// through its environment, as its documentation says. METRICS_ADDR keeps
// its metrics server off port 80.
func doDiffEnviron(url string) map[string]string {
	return map[string]string{"DO_ACCESS_TOKEN": cloudToken, "DO_OVERRIDE_URL": url, "REGION": "fra1",
		"DO_CLUSTER_ID": doClusterID, "METRICS_ADDR": "127.0.0.1:0"}
}

// doDiffRun plays the scenario under one implementation: three droplets
// (two regions; one private-only without IPv6), four Services (default
// REGIONAL_NETWORK; REGIONAL with HTTP, a health check, sticky sessions
// and settings; INTERNAL; externalTrafficPolicy Local), a second sync,
// then one Service deleted.
func doDiffRun(t *testing.T, impl, official string) map[string]string {
	fake := dofake.New(dofake.Options{Token: cloudToken})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	var droplets []godo.Droplet
	for _, d := range []dofake.Droplet{{Name: "d-a", Region: "fra1"}, {Name: "d-b", Region: "ams3", Size: "s-4vcpu-8gb"},
		{Name: "d-c", Region: "fra1", NoPublicIPv4: true, NoIPv6: true}} {
		got, err := fake.AddDroplet(d)
		if err != nil {
			t.Fatal(err)
		}
		droplets = append(droplets, got)
	}
	var e *doEnv
	if impl == "wasmccm" {
		tc := wasmbuild.Go
		if _, err := wasmbuild.TinyGoPath(); err == nil {
			tc = wasmbuild.TinyGo
		}
		providerConfig := fmt.Sprintf("{endpoint: %q, tokenCredential: token, region: fra1, clusterID: %s}", srv.URL, doClusterID)
		e = &doEnv{env: startModule(t, doModule, tc, srv.URL, providerConfig, nil), fake: fake}
	} else {
		e = &doEnv{env: startOfficial(t, official, srv.URL, doDiffEnviron(srv.URL), "--cloud-provider=digitalocean"), fake: fake}
	}
	for i, d := range droplets {
		e.registerNode(d.Name, fmt.Sprintf("10.244.%d.0/24", i+1))
	}
	for _, d := range droplets {
		e.waitInitialized(t, d.Name)
	}
	// Load balancers pick Nodes by address: wait for every Node's before
	// the Services exist (joinLoadBalancers says why).
	eventually(t, 30*time.Second, "node addresses", func() (bool, error) {
		for _, d := range droplets {
			if n, err := e.getNode(d.Name); err != nil || len(n.Status.Addresses) == 0 {
				return false, err
			}
		}
		return true, nil
	})

	ctx := context.Background()
	const ann = "service.beta.kubernetes.io/do-loadbalancer-"
	local := diffService("local", 8080, 30880, nil)
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	services := []*v1.Service{
		diffService("web", 80, 30080, nil),
		diffService("http", 80, 30180, map[string]string{
			ann + "name": "diff-http", ann + "type": "REGIONAL", ann + "protocol": "http",
			ann + "override-health-check": "true", ann + "healthcheck-path": "/ready", ann + "healthcheck-protocol": "http",
			ann + "healthcheck-check-interval-seconds": "5", ann + "healthcheck-unhealthy-threshold": "2",
			ann + "sticky-sessions-type": "cookies", ann + "sticky-sessions-cookie-name": "srv", ann + "sticky-sessions-cookie-ttl": "60",
			ann + "enable-backend-keepalive": "true", ann + "http-idle-timeout-seconds": "120", ann + "size-unit": "2",
			ann + "deny-rules": "cidr:198.51.100.0/24",
		}),
		diffService("internal", 443, 30443, map[string]string{ann + "name": "diff-internal", ann + "network": "INTERNAL"}),
		local,
	}
	uids := map[string]string{}
	for _, svc := range services {
		created, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[svc.Name] = string(created.UID)
	}
	ingress := map[string][]v1.LoadBalancerIngress{}
	var healthPort *strings.Replacer
	for _, svc := range services {
		eventually(t, 90*time.Second, "ingress of "+svc.Name, func() (bool, error) {
			s, err := e.getService(svc.Name)
			if err != nil {
				return false, err
			}
			ingress[svc.Name] = s.Status.LoadBalancer.Ingress
			if s.Spec.HealthCheckNodePort != 0 {
				healthPort = strings.NewReplacer(fmt.Sprint(s.Spec.HealthCheckNodePort), "<healthCheckNodePort>")
			}
			return len(s.Status.LoadBalancer.Ingress) > 0, nil
		})
	}
	// Let the controllers settle: a second sync must change nothing.
	time.Sleep(5 * time.Second)

	out := map[string]string{}
	for _, d := range droplets {
		n, err := e.getNode(d.Name)
		if err != nil {
			t.Fatal(err)
		}
		nodeOutcome(out, "node "+d.Name, n)
	}

	// Default names follow the Service UID, and addresses the order in
	// which the load balancers were created: both are compared by the
	// Service they serve.
	owner := map[string]string{} // load balancer name -> Service
	for _, svc := range services {
		name := svc.Annotations[ann+"name"]
		if name == "" {
			name = lbName(&v1.Service{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uids[svc.Name])}})
		}
		owner[name] = svc.Name
	}
	var pairs []string
	for _, lb := range fake.LoadBalancers() {
		s := owner[lb.Name]
		pairs = append(pairs, "<"+s+" ipv4>", lb.IP)
		if lb.IPv6 != "" {
			pairs = append(pairs, "<"+s+" ipv6>", lb.IPv6)
		}
		if !strings.HasPrefix(lb.Name, "diff-") {
			pairs = append(pairs, "<default name of "+s+">", lb.Name)
		}
	}
	for name, uid := range uids {
		pairs = append(pairs, "<UID of "+name+">", uid)
	}
	symbolic := strings.NewReplacer(reverse(pairs)...)
	for name, in := range ingress {
		out["service "+name+" ingress"] = symbolic.Replace(compact(in))
	}
	for _, svc := range services {
		s, err := e.getService(svc.Name)
		if err != nil {
			t.Fatal(err)
		}
		var written []string
		for k, v := range s.Annotations {
			if _, given := svc.Annotations[k]; !given {
				if k == "kubernetes.digitalocean.com/load-balancer-id" {
					v = "<its load balancer's ID>"
				}
				written = append(written, k+"="+v)
			}
		}
		slices.Sort(written)
		out["service "+svc.Name+" annotations written"] = strings.Join(written, ",")
	}
	for _, lb := range fake.LoadBalancers() {
		p := "load balancer of " + owner[lb.Name] + " "
		out[p+"name"] = symbolic.Replace(lb.Name)
		out[p+"status"] = lb.Status
		out[p+"type, network, stack"] = lb.Type + ", " + lb.Network + ", " + lb.NetworkStack
		out[p+"region, vpc"] = lb.Region.Slug + ", " + lb.VPCUUID
		out[p+"size"] = fmt.Sprintf("slug %q, unit %d", lb.SizeSlug, lb.SizeUnit)
		out[p+"algorithm"] = lb.Algorithm
		out[p+"forwarding rules"] = compact(lb.ForwardingRules)
		out[p+"health check"] = healthPort.Replace(compact(lb.HealthCheck))
		out[p+"sticky sessions"] = compact(lb.StickySessions)
		out[p+"droplets"] = fmt.Sprint(slices.Sorted(slices.Values(lb.DropletIDs)))
		out[p+"tag (droplet selector)"] = lb.Tag
		out[p+"settings"] = fmt.Sprintf("redirect %v, proxy protocol %v, keepalive %v, idle timeout %v, no LE DNS %v",
			lb.RedirectHttpToHttps, lb.EnableProxyProtocol, lb.EnableBackendKeepalive, deref(lb.HTTPIdleTimeoutSeconds), deref(lb.DisableLetsEncryptDNSRecords))
		out[p+"firewall"] = compact(lb.Firewall)
		out[p+"tags"] = symbolic.Replace(strings.Join(slices.Sorted(slices.Values(lb.Tags)), ","))
	}

	// One Service deleted: its load balancer goes, the others stay.
	if err := e.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "web deleted", func() (bool, error) {
		_, err := e.getService("web")
		return apierrors.IsNotFound(err), err
	})
	var left []string
	for _, lb := range fake.LoadBalancers() {
		left = append(left, owner[lb.Name])
	}
	slices.Sort(left)
	out["load balancers after web's deletion, by Service"] = strings.Join(left, ",")
	var writes []string
	for k, v := range fake.Requests() {
		if !strings.HasPrefix(k, "GET ") {
			writes = append(writes, fmt.Sprintf("%s ×%d", k, v))
		}
	}
	slices.Sort(writes)
	out["API writes"] = strings.Join(writes, "; ")
	return out
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// TestDigitalOceanRequests is TestDigitalOceanDifferential's sibling for
// reads: the DigitalOcean API requests per hour, by endpoint, of wasmccm
// with the TinyGo-built digitalocean module and of the official CCM named
// by WASMCCM_DO_CCM, in steady state with Ready Nodes (60, or the
// comma-separated WASMCCM_REQUESTS_NODES) and the CCMs' default periods
// (test/scale/requests says how). Skipped unless the variable is set;
// WASMCCM_REQUESTS_WINDOW changes the window (6 minutes, so that it holds
// a node status update).
func TestDigitalOceanRequests(t *testing.T) {
	nodes := []int{60}
	if v := os.Getenv("WASMCCM_REQUESTS_NODES"); v != "" {
		nodes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				t.Fatalf("WASMCCM_REQUESTS_NODES: %q is not a positive number", s)
			}
			nodes = append(nodes, n)
		}
	}
	compareRequests(t, requests.DigitalOcean, doModule, "WASMCCM_DO_CCM", nodes)
}
