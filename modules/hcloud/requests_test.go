package hcloud

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
)

// requestLog records the requests the provider sends to the fake, as
// "METHOD /path" without the API's /v1 prefix and with "{id}" for each ID.
type requestLog struct {
	mu   sync.Mutex
	sent []string
}

func logRequests(t *testing.T, e *env) *requestLog {
	l := &requestLog{}
	proxy(t, e, func(r *http.Request, _ http.Handler) {
		l.mu.Lock()
		defer l.mu.Unlock()
		segments := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1"), "/")
		for i, seg := range segments {
			if _, err := strconv.ParseInt(seg, 10, 64); err == nil {
				segments[i] = "{id}"
			}
		}
		l.sent = append(l.sent, r.Method+" "+strings.Join(segments, "/"))
	})
	return l
}

// take returns the requests sent since the last take, and how many of
// them change something (every method but GET).
func (l *requestLog) take() (all []string, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	all, l.sent = l.sent, nil
	for _, r := range all {
		if !strings.HasPrefix(r, "GET ") {
			writes++
		}
	}
	return all, writes
}

// TestLoadBalancerRequests counts the requests of a load balancer's life:
// its creation carries the network, services and targets (one action
// where each was one before: 19 requests, 7 of them writes, for this
// Service), and an update sends update_service only for a service that
// differs from the load balancer's (2 writes for this one before, each
// time).
func TestLoadBalancerRequests(t *testing.T) {
	e := newEnv(t, `{"network": "k8s", "loadBalancers": {"location": "nbg1"}}`, hcloudfake.Options{ActionPolls: 1})
	l := logRequests(t, e)
	ctx := context.Background()
	svc := testService("uid-requests", map[string]string{annUsePrivateIP: "true", annHCInterval: "5s", annProtocol: "http", annCookieName: "TRACK"},
		abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080}, abi.ServicePort{Protocol: "TCP", Port: 443, NodePort: 30443})
	nodes := []abi.Node{*e.node("a"), *e.node("b"), *e.node("c")}
	expect := func(call string, want ...string) {
		t.Helper()
		if sent, _ := l.take(); !slices.Equal(sent, want) {
			t.Fatalf("%s sent %d requests:\n%s\nwant %d:\n%s", call, len(sent), strings.Join(sent, "\n"), len(want), strings.Join(want, "\n"))
		}
	}

	if _, err := e.p.EnsureLoadBalancer(ctx, "test", svc, nodes); err != nil {
		t.Fatal(err)
	}
	expect("EnsureLoadBalancer of a new Service", "GET /load_balancers", "GET /load_balancers", "GET /networks", "POST /load_balancers",
		"GET /actions/{id}", "GET /load_balancers/{id}", "GET /load_balancers/{id}")
	lb := e.cloud.LoadBalancers()[0]
	if len(lb.Services) != 2 || lb.Services[1].DestinationPort != 30443 || lb.Services[1].HTTP == nil || lb.Services[1].HTTP.CookieName != "TRACK" ||
		lb.Services[1].HealthCheck.Interval != 5 || len(lb.PrivateNet) != 1 || len(lb.Targets) != 3 || !lb.Targets[2].UsePrivateIP {
		t.Fatalf("load balancer created as %+v", lb)
	}

	if err := e.p.UpdateLoadBalancer(ctx, "test", svc, nodes); err != nil {
		t.Fatal(err)
	}
	expect("UpdateLoadBalancer with nothing changed", "GET /load_balancers")

	svc.Ports[1].NodePort = 31443
	if err := e.p.UpdateLoadBalancer(ctx, "test", svc, nodes); err != nil {
		t.Fatal(err)
	}
	expect("UpdateLoadBalancer with one node port changed", "GET /load_balancers", "POST /load_balancers/{id}/actions/update_service", "GET /actions/{id}")
	if got := e.cloud.LoadBalancers()[0].Services; got[0].DestinationPort != 30080 || got[1].DestinationPort != 31443 {
		t.Fatalf("services after the update: %+v", got)
	}
}

// satisfiedBy tells apart each setting update_service could change, and
// ignores those the wanted service leaves unset.
func TestServiceSatisfiedBy(t *testing.T) {
	full := func() lbService {
		return lbService{ListenPort: 80, Protocol: "http", DestinationPort: 30080, Proxyprotocol: ptr(false),
			HTTP: &lbServiceHTTP{CookieName: ptr("c"), CookieLifetime: ptr(300), RedirectHTTP: ptr(false), StickySessions: ptr(true)},
			HealthCheck: &lbServiceHealth{Protocol: "http", Port: ptr(30080), Interval: ptr(15), Timeout: ptr(10), Retries: ptr(3),
				HTTP: &lbServiceHealthHTTP{Domain: ptr("d"), Path: ptr("/"), StatusCodes: &[]string{"2??"}, TLS: ptr(false)}}}
	}
	have := full()
	if want := full(); !want.satisfiedBy(&have) {
		t.Fatal("a service is not satisfied by its equal")
	}
	if want := (lbService{ListenPort: 80, Protocol: "http", DestinationPort: 30080}); !want.satisfiedBy(&have) {
		t.Fatal("a service setting only its ports and protocol is not satisfied by one with more settings")
	}
	changes := map[string]func(*lbService){
		"protocol":           func(s *lbService) { s.Protocol = "https" },
		"destination port":   func(s *lbService) { s.DestinationPort = 30081 },
		"proxy protocol":     func(s *lbService) { s.Proxyprotocol = ptr(true) },
		"cookie name":        func(s *lbService) { s.HTTP.CookieName = ptr("other") },
		"cookie lifetime":    func(s *lbService) { s.HTTP.CookieLifetime = ptr(60) },
		"redirect":           func(s *lbService) { s.HTTP.RedirectHTTP = ptr(true) },
		"sticky sessions":    func(s *lbService) { s.HTTP.StickySessions = ptr(false) },
		"check protocol":     func(s *lbService) { s.HealthCheck.Protocol = "tcp" },
		"check port":         func(s *lbService) { s.HealthCheck.Port = ptr(1) },
		"check interval":     func(s *lbService) { s.HealthCheck.Interval = ptr(5) },
		"check timeout":      func(s *lbService) { s.HealthCheck.Timeout = ptr(5) },
		"check retries":      func(s *lbService) { s.HealthCheck.Retries = ptr(1) },
		"check domain":       func(s *lbService) { s.HealthCheck.HTTP.Domain = ptr("e") },
		"check path":         func(s *lbService) { s.HealthCheck.HTTP.Path = ptr("/healthz") },
		"check status codes": func(s *lbService) { s.HealthCheck.HTTP.StatusCodes = &[]string{"200"} },
		"check TLS":          func(s *lbService) { s.HealthCheck.HTTP.TLS = ptr(true) },
	}
	for name, change := range changes {
		want := full()
		change(&want)
		if want.satisfiedBy(&have) {
			t.Errorf("a changed %s is taken as satisfied", name)
		}
	}
	bare := lbService{ListenPort: 80, Protocol: "http", DestinationPort: 30080}
	if want := full(); want.satisfiedBy(&bare) {
		t.Error("HTTP and health check settings are taken as satisfied by a service the API answered without them")
	}
}
