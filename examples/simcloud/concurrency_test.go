package simcloud

import (
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentCreateSameName races many creates of one name: exactly one
// must win, the rest must see 409.
func TestConcurrentCreateSameName(t *testing.T) {
	e := newTestEnv(t, Options{})
	const n = 20
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = e.api("POST", "/v1/loadbalancers", lbBody("same")).status
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[201] != 1 || count[409] != n-1 {
		t.Fatalf("statuses %v", count)
	}
	c := e.cloud.Counters()
	if c.LoadBalancersCreated != 1 || c.Status("POST /v1/loadbalancers", 409) != n-1 {
		t.Fatalf("counters %+v", c)
	}
}

// TestConcurrentMixed runs API calls, admin calls and Go methods in
// parallel; run with -race.
func TestConcurrentMixed(t *testing.T) {
	e := newTestEnv(t, Options{Instances: []Instance{{Name: "n1"}, {Name: "n2"}}})
	const workers, perWorker = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				name := fmt.Sprintf("lb-%d-%d", w, i)
				if r := e.api("POST", "/v1/loadbalancers", lbBody(name, "i-0001")); r.status != 201 {
					t.Errorf("create %s: %d %s", name, r.status, r.body)
					return
				}
				e.api("PUT", "/v1/loadbalancers/"+name, lbBody(name, "i-0001", "i-0002"))
				e.api("GET", "/v1/instances?name=n1", nil)
				e.api("POST", "/v1/routes", Route{Name: name, DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", w, i), TargetName: "n2"})
				if i%2 == 0 {
					e.api("DELETE", "/v1/loadbalancers/"+name, nil)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 30 {
			e.cloud.SetFault(Fault{Name: "noop", Route: "GET /v1/zones", Latency: 0})
			e.cloud.Counters()
			e.cloud.LoadBalancers()
			e.cloud.Routes()
			e.cloud.SetInstanceState("i-0002", []string{StateRunning, StateStopped}[i%2])
			e.admin("GET", "/admin/state", nil)
			w := httptest.NewRecorder()
			e.cloud.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/admin/counters", nil))
		}
	})
	wg.Wait()

	lbs := e.cloud.LoadBalancers()
	if len(lbs) != workers*perWorker/2 {
		t.Fatalf("%d load balancers", len(lbs))
	}
	ips := map[string]bool{}
	for _, lb := range lbs {
		if ips[lb.IP] {
			t.Fatalf("IP %s reused", lb.IP)
		}
		ips[lb.IP] = true
		if !reflect.DeepEqual(lb.Targets, []string{"i-0001", "i-0002"}) {
			t.Fatalf("%s targets %v", lb.Name, lb.Targets)
		}
	}
	c := e.cloud.Counters()
	total := workers * perWorker
	if c.LoadBalancersCreated != total || c.LoadBalancersUpdated != total || c.LoadBalancersDeleted != total/2 ||
		c.RoutesCreated != total || len(e.cloud.Routes()) != total {
		t.Fatalf("counters %+v", c)
	}
	sum := 0
	for _, v := range c.Requests {
		sum += v
	}
	if want := total*4 + total/2; sum != want || c.Statuses[200]+c.Statuses[201]+c.Statuses[204] != want {
		t.Fatalf("requests %d, want %d: %+v", sum, want, c)
	}
}

func TestCountersAdmin(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.mustInstance("n")
	e.api("GET", "/v1/instances", nil)
	e.api("GET", "/v1/instances/i-0001", nil)
	e.api("GET", "/v1/instances/i-0002", nil)
	e.api("POST", "/v1/routes", Route{Name: "r", DestinationCIDR: "10.0.0.0/24", TargetInstance: "i-0001"})
	e.api("DELETE", "/v1/routes/r", nil)
	e.api("GET", "/v1/bogus", nil)
	e.request("GET", "/v1/zones", "", nil)

	r := e.admin("GET", "/admin/counters", nil)
	expectStatus(t, r, 200)
	var got Counters
	r.decode(t, &got)
	want := Counters{
		Requests: map[string]int{
			"GET /v1/instances": 1, "GET /v1/instances/{id}": 2, "POST /v1/routes": 1,
			"DELETE /v1/routes/{name}": 1, "/v1/": 1, "GET /v1/zones": 1,
		},
		Statuses: map[int]int{200: 2, 201: 1, 204: 1, 404: 2, 401: 1},
		EndpointStatuses: map[string]map[int]int{
			"GET /v1/instances": {200: 1}, "GET /v1/instances/{id}": {200: 1, 404: 1},
			"POST /v1/routes": {201: 1}, "DELETE /v1/routes/{name}": {204: 1}, "/v1/": {404: 1}, "GET /v1/zones": {401: 1},
		},
		RoutesCreated: 1,
		RoutesDeleted: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counters\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(e.cloud.Counters(), want) {
		t.Fatal("Go and HTTP counters differ")
	}
	// Admin traffic is not counted.
	expectStatus(t, e.admin("DELETE", "/admin/counters", nil), 204)
	if c := e.cloud.Counters(); len(c.Requests) != 0 || c.RoutesCreated != 0 {
		t.Fatalf("after reset %+v", c)
	}
	// Snapshots are copies.
	c := e.cloud.Counters()
	c.Requests["x"] = 1
	if _, ok := e.cloud.Counters().Requests["x"]; ok {
		t.Fatal("Counters returned shared map")
	}
}

func TestEndpointsRegistered(t *testing.T) {
	c := New(Options{})
	h := c.Handler()
	for _, p := range Endpoints() {
		method, path, _ := strings.Cut(p, " ")
		// Substitute wildcards with a value and check the pattern matched
		// is the endpoint itself, not the /v1/ catch-all.
		req := httptest.NewRequest(method, replaceWildcards(path), nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if got := c.Counters().Requests[p]; got != 1 {
			t.Errorf("%s not routed to its handler (status %d)", p, w.Code)
		}
	}
}

func replaceWildcards(path string) string {
	out := []byte{}
	skip := false
	for i := range len(path) {
		switch {
		case path[i] == '{':
			skip = true
			out = append(out, 'x')
		case path[i] == '}':
			skip = false
		case !skip:
			out = append(out, path[i])
		}
	}
	return string(out)
}
