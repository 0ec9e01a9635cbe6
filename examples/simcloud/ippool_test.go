package simcloud

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }

func TestIPPoolRange(t *testing.T) {
	for _, tt := range []struct {
		prefix, start     string
		first, last, fail string
	}{
		{prefix: "", first: "203.0.113.10", last: "203.0.113.254"},
		{prefix: "198.51.100.0/24", start: "198.51.100.200", first: "198.51.100.200", last: "198.51.100.254"},
		{prefix: "192.0.2.0/29", first: "192.0.2.1", last: "192.0.2.6"},
		{prefix: "192.0.2.0/28", first: "192.0.2.10", last: "192.0.2.14"},
		{prefix: "192.0.2.0/31", first: "192.0.2.0", last: "192.0.2.1"},
		{prefix: "192.0.2.7/32", first: "192.0.2.7", last: "192.0.2.7"},
		{prefix: "2001:db8::/120", first: "2001:db8::a", last: "2001:db8::ff"},
		{prefix: "192.0.2.1/24", fail: "network address"},
		{prefix: "192.0.2.0/24", start: "192.0.3.1", fail: "not inside"},
		{prefix: "192.0.2.0/24", start: "192.0.2.255", fail: "not inside"},
	} {
		t.Run(tt.prefix+"@"+tt.start, func(t *testing.T) {
			var p netip.Prefix
			var s netip.Addr
			if tt.prefix != "" {
				p = mustPrefix(tt.prefix)
			}
			if tt.start != "" {
				s = mustAddr(tt.start)
			}
			pool, err := newIPPool(p, s)
			if tt.fail != "" {
				if err == nil {
					t.Fatalf("no error, want %q", tt.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pool.first.String() != tt.first || pool.last.String() != tt.last {
				t.Fatalf("range %s, want %s-%s", pool, tt.first, tt.last)
			}
			if pool.next(pool.last) != pool.first {
				t.Fatal("next does not wrap")
			}
		})
	}
}

func TestIPAllocation(t *testing.T) {
	e := newTestEnv(t, Options{IPPool: mustPrefix("192.0.2.0/29")}) // .1-.6
	create := func(name string) (string, int) {
		t.Helper()
		r := e.api("POST", "/v1/loadbalancers", lbBody(name))
		if r.status != 201 {
			return r.errMsg(t), r.status
		}
		var lb LoadBalancer
		r.decode(t, &lb)
		return lb.IP, r.status
	}
	for i := 1; i <= 6; i++ {
		ip, status := create(fmt.Sprintf("lb%d", i))
		if want := fmt.Sprintf("192.0.2.%d", i); status != 201 || ip != want {
			t.Fatalf("lb%d: %d %s, want %s", i, status, ip, want)
		}
	}
	if msg, status := create("lb7"); status != 503 {
		t.Fatalf("exhausted pool: %d %s", status, msg)
	}
	if _, err := e.cloud.CreateLoadBalancer(lbBody("lb7")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Go API: %v", err)
	}
	expectStatus(t, e.api("DELETE", "/v1/loadbalancers/lb3", nil), 204)
	if ip, _ := create("lb8"); ip != "192.0.2.3" {
		t.Fatalf("only free address not used: %s", ip)
	}
}

func TestIPAllocationRoundRobinAndExplicit(t *testing.T) {
	e := newTestEnv(t, Options{IPPool: mustPrefix("192.0.2.0/28")}) // .10-.14
	ip := func(name, want string) LoadBalancer {
		t.Helper()
		lb, err := e.cloud.CreateLoadBalancer(lbBody(name))
		if err != nil {
			t.Fatal(err)
		}
		if lb.IP != want {
			t.Fatalf("%s got %s, want %s", name, lb.IP, want)
		}
		return lb
	}
	ip("a", "192.0.2.10")
	ip("b", "192.0.2.11")
	if err := e.cloud.DeleteLoadBalancer("a"); err != nil {
		t.Fatal(err)
	}
	// The cursor moves on: a just-released IP is not handed out again.
	ip("c", "192.0.2.12")

	req := lbBody("d")
	req.IP = "192.0.2.10"
	r := e.api("POST", "/v1/loadbalancers", req)
	expectStatus(t, r, 201)
	req.Name, req.IP = "e", "192.0.2.11"
	r = e.api("POST", "/v1/loadbalancers", req)
	expectStatus(t, r, 409)
	req.IP = "192.0.2.15" // broadcast
	expectStatus(t, e.api("POST", "/v1/loadbalancers", req), 400)

	// .13 and .14 remain; then the cursor wraps past the held .10-.12.
	ip("f", "192.0.2.13")
	ip("g", "192.0.2.14")
	if err := e.cloud.DeleteLoadBalancer("b"); err != nil {
		t.Fatal(err)
	}
	ip("h", "192.0.2.11")
}

// TestIPNeverShared churns load balancers and checks that no two ever hold
// the same address.
func TestIPNeverShared(t *testing.T) {
	c := New(Options{IPPool: mustPrefix("192.0.2.0/27")})
	for i := range 300 {
		if _, err := c.CreateLoadBalancer(lbBody(fmt.Sprintf("lb%d", i))); err != nil && !errors.Is(err, ErrExhausted) {
			t.Fatal(err)
		}
		if i%3 == 0 {
			c.DeleteLoadBalancer(fmt.Sprintf("lb%d", i/2))
		}
		seen := map[string]string{}
		for _, lb := range c.LoadBalancers() {
			if other, ok := seen[lb.IP]; ok {
				t.Fatalf("step %d: %s and %s share %s", i, lb.Name, other, lb.IP)
			}
			seen[lb.IP] = lb.Name
		}
	}
}
