package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

func writeSpec(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadSpec: the documented fields parse, a relative limitedCredentials
// dir is the spec file's, and a misspelt field fails with the list of the
// valid ones.
func TestReadSpec(t *testing.T) {
	path := writeSpec(t, `nodes:
- {name: a, providerID: "x://1", exists: true, shutdown: true, lookupByName: true}
- {name: b, providerID: "y://2", expectError: Error}
routes: {destinationCIDR: 10.9.0.0/24}
limitedCredentials: {dir: readonly}
`)
	s, err := ReadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	if !*s.Nodes[0].Shutdown || !s.Nodes[0].LookupByName || s.Nodes[1].ExpectError != "Error" || s.Routes.destination() != "10.9.0.0/24" ||
		s.LimitedCredentials.Dir != filepath.Join(filepath.Dir(path), "readonly") {
		t.Fatalf("spec %+v", s)
	}

	_, err = ReadSpec(writeSpec(t, "nodes:\n- {name: a, shutdwn: true}\n"))
	if err == nil {
		t.Fatal("a misspelt field was accepted")
	}
	for _, want := range []string{`unknown field "shutdwn"`, "  nodes[].shutdown\n", "  nodes[].lookupByName\n", "  nodes[].expectError\n",
		"  loadBalancer.skip\n", "  loadBalancer.annotations\n", "  loadBalancer.list.otherCluster.providerConfig\n", "  routes.destinationCIDR\n", "  limitedCredentials.dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	s, err = ReadSpec(writeSpec(t, "loadBalancer: {list: {seed: 50, foreign: [by-hand], otherCluster: {clusterName: c2, providerConfig: {clusterID: c2}}}}\n"))
	if l := s.LoadBalancer.List; err != nil || l.seed() != 50 || l.Foreign[0] != "by-hand" || l.OtherCluster.name("kubernetes") != "c2" || string(l.OtherCluster.ProviderConfig) != `{"clusterID":"c2"}` {
		t.Fatalf("loadBalancer.list: %v %+v", err, s)
	}
	if s, _ := ReadSpec(writeSpec(t, "nodes: []\n")); s.LoadBalancer.List.seed() != 2 || s.LoadBalancer.List.OtherCluster.name("prod") != "prod-other" {
		t.Errorf("loadBalancer.list defaults: %+v", s.LoadBalancer.List)
	}
	if _, err := ReadSpec(writeSpec(t, "loadBalancer: {list: {seed: -1}}\n")); err == nil {
		t.Error("a negative seed was accepted")
	}

	// Every Service the suite makes a load balancer for carries the
	// annotations, so the seeded ones take the same path as the test one.
	s, err = ReadSpec(writeSpec(t, "loadBalancer: {annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []abi.Service{s.service(), s.serviceNamed("lb-1")} {
		if len(svc.Annotations) != 1 || svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" {
			t.Errorf("Service %s has annotations %v", svc.Name, svc.Annotations)
		}
	}
	s.service().Annotations["x"] = "y"
	if len(s.serviceNamed("lb-1").Annotations) != 1 {
		t.Error("a change to one Service's annotations reached the others")
	}
	if _, err := ReadSpec(writeSpec(t, "loadBalancer: {annotations: {\"\": nlb}}\n")); err == nil || !strings.Contains(err.Error(), "loadBalancer.annotations has an empty key") {
		t.Errorf("an empty annotation key: %v", err)
	}

	s, err = ReadSpec(writeSpec(t, "rateLimit: {perHour: 3600}\nwarm: {period: 1h, stateMaxAge: 30s}\n"))
	if err != nil || s.RateLimit.PerHour != 3600 || s.Warm.period() != time.Hour || s.Warm.stateMaxAge() != 30*time.Second {
		t.Fatalf("rateLimit, warm: %v %+v", err, s)
	}
	if s, _ := ReadSpec(writeSpec(t, "nodes: []\n")); s.Warm.period() != defaultWarmPeriod || s.Warm.stateMaxAge() != defaultWarmStateMaxAge || s.RateLimit != nil {
		t.Errorf("warm defaults: %+v", s.Warm)
	}
	for _, bad := range []string{"warm: {period: 0s}\n", "warm: {period: 7m}\n", "warm: {stateMaxAge: soon}\n", "rateLimit: {perHour: 0}\n"} {
		if _, err := ReadSpec(writeSpec(t, bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}

	s, err = ReadSpec(writeSpec(t, "loadBalancer: {destructive: [{method: DELETE, path: \"/v1/lbs/*\"}, {action: DeleteLoadBalancer}]}\nslowCloud: {callTimeout: 2s, retryWait: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if timeout, settle, wait := s.SlowCloud.durations(); timeout != 2*time.Second || settle != defaultSettle || wait != time.Second {
		t.Errorf("slowCloud: %v %v %v", timeout, settle, wait)
	}
	d := s.LoadBalancer.Destructive
	for _, m := range []struct {
		r    SpecRequest
		ex   Exchange
		want bool
	}{
		{d[0], Exchange{Method: "DELETE", URL: "http://c/v1/lbs/7"}, true},
		{d[0], Exchange{Method: "delete", URL: "http://c/v1/lbs/7?force=1"}, true},
		{d[0], Exchange{Method: "DELETE", URL: "http://c/v1/lbs/7/targets/1"}, false},
		{d[0], Exchange{Method: "GET", URL: "http://c/v1/lbs/7"}, false},
		{d[1], Exchange{Method: "POST", URL: "http://c/", RequestBody: "Action=DeleteLoadBalancer&LoadBalancerName=x"}, true},
		{d[1], Exchange{Method: "GET", URL: "http://c/?Action=DeleteLoadBalancer&LoadBalancerName=x"}, true},
		{d[1], Exchange{Method: "POST", URL: "http://c/", RequestBody: "Action=DeleteLoadBalancerListeners&LoadBalancerName=x"}, false},
	} {
		if got := m.r.matches(m.ex); got != m.want {
			t.Errorf("%s matches %s %s %q: %v, want %v", m.r, m.ex.Method, m.ex.URL, m.ex.RequestBody, got, m.want)
		}
	}
	for _, bad := range []string{"loadBalancer: {destructive: [{method: DELETE}]}\n", "loadBalancer: {destructive: [{path: /a, action: B}]}\n",
		"loadBalancer: {destructive: [{path: \"/a[\"}]}\n", "slowCloud: {settle: 1m}\n", "slowCloud: {callTimeout: 0s}\n", "slowCloud: {callTimeout: 2s, retryWait: soon}\n"} {
		if _, err := ReadSpec(writeSpec(t, bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}

	if _, err := ReadSpec(writeSpec(t, "nodes:\n- {name: a, expectError: Gone}\n")); err == nil || !strings.Contains(err.Error(), "want one of NotFound") {
		t.Errorf("expectError: Gone: %v", err)
	}
}
