package simcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFaultFailNext(t *testing.T) {
	e := newTestEnv(t, Options{})
	f, err := e.cloud.SetFault(Fault{Route: "POST /v1/loadbalancers", FailNext: 2})
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "fault-1" || f.Status != 503 {
		t.Fatalf("defaults not applied: %+v", f)
	}
	for i := range 2 {
		r := e.api("POST", "/v1/loadbalancers", lbBody("lb"))
		expectStatus(t, r, 503)
		if msg := r.errMsg(t); !strings.Contains(msg, "fault-1") {
			t.Fatalf("attempt %d: %q", i, msg)
		}
		if r.header.Get("Retry-After") != "" {
			t.Fatal("Retry-After on a 503 without retryAfter")
		}
	}
	if got := e.cloud.Faults()[0].FailNext; got != 0 {
		t.Fatalf("FailNext left %d", got)
	}
	// Other endpoints are unaffected, and the third attempt succeeds.
	expectStatus(t, e.api("GET", "/v1/loadbalancers", nil), 200)
	expectStatus(t, e.api("POST", "/v1/loadbalancers", lbBody("lb")), 201)

	c := e.cloud.Counters()
	if c.FaultsInjected != 2 || c.Status("POST /v1/loadbalancers", 503) != 2 || c.LoadBalancersCreated != 1 || c.Requests["POST /v1/loadbalancers"] != 3 {
		t.Fatalf("counters %+v", c)
	}
}

func TestFaultSelectors(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
		fails []string // "METHOD path" requests expected to fail
		pass  []string
	}{
		{"endpoint", Fault{Route: "GET /v1/instances/{id}"},
			[]string{"GET /v1/instances/i-0001", "GET /v1/instances/i-0404"},
			[]string{"GET /v1/instances", "GET /v1/zones"}},
		{"method", Fault{Method: "delete"},
			[]string{"DELETE /v1/loadbalancers/x", "DELETE /v1/routes/x"},
			[]string{"GET /v1/loadbalancers/x", "POST /v1/routes"}},
		{"resource", Fault{PathPrefix: "/v1/routes"},
			[]string{"GET /v1/routes", "POST /v1/routes", "DELETE /v1/routes/x"},
			[]string{"GET /v1/loadbalancers", "GET /v1/instances"}},
		{"method and resource", Fault{Method: "GET", PathPrefix: "/v1/loadbalancers"},
			[]string{"GET /v1/loadbalancers", "GET /v1/loadbalancers/x"},
			[]string{"DELETE /v1/loadbalancers/x", "GET /v1/routes"}},
		{"everything", Fault{},
			[]string{"GET /v1/zones", "GET /v1/nope"},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, Options{})
			e.mustInstance("n")
			tt.fault.FailNext = 1000
			if _, err := e.cloud.SetFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			for _, req := range append(tt.fails, tt.pass...) {
				method, path, _ := strings.Cut(req, " ")
				r := e.api(method, path, `{}`)
				injected := r.status == 503
				if want := !contains(tt.pass, req); injected != want {
					t.Errorf("%s: status %d, injected=%v want %v", req, r.status, injected, want)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestFaultThrottle(t *testing.T) {
	e := newTestEnv(t, Options{})
	r := e.admin("POST", "/admin/faults", `{"name":"throttle","resource":"instances","failNext":1,"status":429}`)
	expectStatus(t, r, 200)
	var f Fault
	r.decode(t, &f)
	if f.RetryAfter != 1 {
		t.Fatalf("429 without default retryAfter: %+v", f)
	}
	r = e.api("GET", "/v1/instances", nil)
	expectStatus(t, r, 429)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q", got)
	}

	// Replacing by name, with an explicit Retry-After on a 500.
	r = e.admin("POST", "/admin/faults", Fault{Name: "throttle", PathPrefix: "/v1/instances", FailNext: 1, Status: 500, RetryAfter: 7})
	expectStatus(t, r, 200)
	if n := len(e.cloud.Faults()); n != 1 {
		t.Fatalf("%d faults after replace", n)
	}
	r = e.api("GET", "/v1/instances", nil)
	expectStatus(t, r, 500)
	if got := r.header.Get("Retry-After"); got != "7" {
		t.Fatalf("Retry-After %q", got)
	}
	expectStatus(t, e.api("GET", "/v1/instances", nil), 200)
}

func TestFaultErrorRateDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		c := New(Options{Seed: seed})
		if _, err := c.SetFault(Fault{PathPrefix: "/v1/zones", ErrorRate: 0.5}); err != nil {
			t.Fatal(err)
		}
		h := c.Handler()
		var b strings.Builder
		for range 64 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/zones", nil))
			if w.Code == 503 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b, other := run(42), run(42), run(43)
	if a != b {
		t.Fatalf("same seed, different outcomes:\n%s\n%s", a, b)
	}
	if a == other {
		t.Fatalf("different seeds, same outcomes: %s", a)
	}
	if n := strings.Count(a, "x"); n < 16 || n > 48 {
		t.Fatalf("%d/64 failures at rate 0.5: %s", n, a)
	}

	for _, rate := range []float64{0, 1} {
		c := New(Options{})
		c.SetFault(Fault{ErrorRate: rate, Latency: 0})
		w := httptest.NewRecorder()
		c.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/zones", nil))
		if failed := w.Code == 503; failed != (rate == 1) {
			t.Fatalf("rate %v: status %d", rate, w.Code)
		}
	}
}

func TestFaultLatency(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.cloud.SetFault(Fault{Route: "GET /v1/zones", Latency: 40 * time.Millisecond})
	start := time.Now()
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("zones took %v", d)
	}
	start = time.Now()
	expectStatus(t, e.api("GET", "/v1/instances", nil), 200)
	if d := time.Since(start); d >= 40*time.Millisecond {
		t.Fatalf("unmatched endpoint delayed: %v", d)
	}

	// A client giving up during the delay is counted as a request without
	// a status.
	e.cloud.SetFault(Fault{Route: "GET /v1/zones", Latency: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/zones", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if res, err := e.srv.Client().Do(req); err == nil {
		res.Body.Close()
		t.Fatal("request did not time out")
	}
	deadline := time.Now().Add(2 * time.Second)
	for e.cloud.Counters().Requests["GET /v1/zones"] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("abandoned request not counted: %+v", e.cloud.Counters())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c := e.cloud.Counters(); c.Status("GET /v1/zones", 200) != 1 || len(c.EndpointStatuses["GET /v1/zones"]) != 1 {
		t.Fatalf("counters %+v", c)
	}
}

// TestFaultAfterCommit checks the lost-response fault: the load balancer is
// created, the client sees a 503, and its retry gets a 409 it must handle.
func TestFaultAfterCommit(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.cloud.SetFault(Fault{Route: "POST /v1/loadbalancers", FailNext: 1, AfterCommit: true})
	expectStatus(t, e.api("POST", "/v1/loadbalancers", lbBody("lb")), 503)
	if _, ok := e.cloud.LoadBalancer("lb"); !ok {
		t.Fatal("after-commit fault did not commit")
	}
	expectStatus(t, e.api("POST", "/v1/loadbalancers", lbBody("lb")), 409)
	c := e.cloud.Counters()
	if c.LoadBalancersCreated != 1 || c.FaultsInjected != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestFaultOrderAndClear(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.cloud.SetFault(Fault{Name: "slow", Latency: 20 * time.Millisecond})
	e.cloud.SetFault(Fault{Name: "first", FailNext: 1, Status: 502})
	e.cloud.SetFault(Fault{Name: "second", FailNext: 1, Status: 504, Latency: 20 * time.Millisecond})
	// Latencies of all matching faults add up; the first failing fault
	// answers and later ones are not consumed.
	start := time.Now()
	expectStatus(t, e.api("GET", "/v1/zones", nil), 502)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("latency %v", d)
	}
	expectStatus(t, e.api("GET", "/v1/zones", nil), 504)
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)

	r := e.admin("GET", "/admin/faults", nil)
	var list []Fault
	r.decode(t, &list)
	if len(list) != 3 || list[0].Name != "slow" || list[0].Latency != 20*time.Millisecond || list[2].Status != 504 {
		t.Fatalf("faults %+v", list)
	}
	if !strings.Contains(string(r.body), `"latency":"20ms"`) {
		t.Fatalf("latency not a duration string: %s", r.body)
	}
	expectStatus(t, e.admin("DELETE", "/admin/faults/slow", nil), 204)
	expectStatus(t, e.admin("DELETE", "/admin/faults/slow", nil), 404)
	if e.cloud.ClearFault("nope") || !e.cloud.ClearFault("first") {
		t.Fatal("ClearFault result")
	}
	expectStatus(t, e.admin("DELETE", "/admin/faults", nil), 204)
	if n := len(e.cloud.Faults()); n != 0 {
		t.Fatalf("%d faults left", n)
	}
	e.cloud.SetFault(Fault{FailNext: 5})
	e.cloud.ClearFaults()
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
}

func TestFaultValidation(t *testing.T) {
	e := newTestEnv(t, Options{})
	for _, tt := range []struct {
		name, body, want string
	}{
		{"unknown endpoint", `{"endpoint":"GET /v1/instance"}`, "unknown endpoint"},
		{"unknown resource", `{"resource":"lbs"}`, "unknown resource"},
		{"unknown method", `{"method":"PATCH"}`, "unknown method"},
		{"status 404", `{"failNext":1,"status":404}`, "status"},
		{"rate above 1", `{"errorRate":1.5}`, "errorRate"},
		{"negative failNext", `{"failNext":-1}`, "failNext"},
		{"bad latency", `{"latency":"soon"}`, "latency"},
		{"numeric latency", `{"latency":100}`, "latency"},
		{"negative latency", `{"latency":"-1s"}`, "latency"},
		{"unknown field", `{"fail_next":1}`, "unknown field"},
		{"bad name", `{"name":"a b"}`, "name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.admin("POST", "/admin/faults", tt.body)
			expectStatus(t, r, 400)
			if msg := r.errMsg(t); !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q does not mention %q", msg, tt.want)
			}
		})
	}
	if n := len(e.cloud.Faults()); n != 0 {
		t.Fatalf("%d faults set by invalid requests", n)
	}
}

// TestFaultWireFormat: the admin API keeps simcloud's selector names
// ("endpoint" for Route, "resource" for a PathPrefix under /v1/) and
// duration strings, and rejects in Go what it could not show on the wire.
func TestFaultWireFormat(t *testing.T) {
	e := newTestEnv(t, Options{})
	in := `{"name":"x","endpoint":"GET /v1/zones","method":"get","resource":"zones","latency":"1.5s","always":true,"status":401}`
	r := e.admin("POST", "/admin/faults", in)
	expectStatus(t, r, 200)
	want := `{"name":"x","endpoint":"GET /v1/zones","method":"GET","resource":"zones","latency":"1.5s","always":true,"status":401}`
	if got := strings.TrimSpace(string(r.body)); got != want {
		t.Fatalf("POST answered\n%s\nwant\n%s", got, want)
	}
	f := e.cloud.Faults()[0]
	if f.Route != "GET /v1/zones" || f.PathPrefix != "/v1/zones" || f.Latency != 1500*time.Millisecond || !f.Always {
		t.Fatalf("decoded %+v", f)
	}
	if got := strings.TrimSpace(string(e.admin("GET", "/admin/faults", nil).body)); got != "["+want+"]" {
		t.Fatalf("GET /admin/faults: %s", got)
	}

	for _, tt := range []struct {
		name  string
		fault Fault
		want  string
	}{
		{"path prefix outside /v1", Fault{PathPrefix: "/admin"}, "unknown resource"},
		{"path prefix below a resource", Fault{PathPrefix: "/v1/loadbalancers/web"}, "unknown resource"},
		{"catch-all route", Fault{Route: "/v1/"}, "unknown endpoint"},
		{"status 400", Fault{Status: 400}, "status must be 401, 409, 423, 429 or 500-599"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.cloud.SetFault(tt.fault)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func TestGlobalRateLimit(t *testing.T) {
	e := newTestEnv(t, Options{Global: Global{RateLimit: 1, Burst: 2}})
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
	expectStatus(t, e.api("GET", "/v1/instances", nil), 200)
	r := e.api("GET", "/v1/zones", nil)
	expectStatus(t, r, 429)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q", got)
	}
	r.errMsg(t)
	// Unauthenticated requests and /admin do not consume tokens.
	expectStatus(t, e.request("GET", "/v1/zones", "", nil), 401)
	expectStatus(t, e.admin("GET", "/admin/counters", nil), 200)
	if c := e.cloud.Counters(); c.RateLimited != 1 || c.Statuses[429] != 1 || c.Statuses[401] != 1 {
		t.Fatalf("counters %+v", c)
	}

	// A slow rate gives a longer Retry-After, rounded up.
	r = e.admin("PUT", "/admin/global", `{"rateLimit":0.25,"burst":1}`)
	expectStatus(t, r, 200)
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
	r = e.api("GET", "/v1/zones", nil)
	expectStatus(t, r, 429)
	if got := r.header.Get("Retry-After"); got != "4" {
		t.Fatalf("Retry-After %q", got)
	}

	// Rate limited requests do not consume fault FailNext counts.
	e.cloud.SetFault(Fault{FailNext: 1})
	expectStatus(t, e.api("GET", "/v1/zones", nil), 429)
	if e.cloud.Faults()[0].FailNext != 1 {
		t.Fatal("fault consumed by a rate-limited request")
	}

	// Removing the limit.
	g, err := e.cloud.SetGlobal(Global{})
	if err != nil || g != (Global{}) {
		t.Fatal(g, err)
	}
	e.cloud.ClearFaults()
	for range 5 {
		expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
	}

	// The burst defaults to ceil(rate).
	g, _ = e.cloud.SetGlobal(Global{RateLimit: 2.5})
	if g.Burst != 3 {
		t.Fatalf("burst %d", g.Burst)
	}
}

func TestTokenBucketRefill(t *testing.T) {
	var b tokenBucket
	now := time.Unix(1000, 0)
	b.reset(Global{RateLimit: 10, Burst: 1}, now)
	if ok, _ := b.take(now); !ok {
		t.Fatal("first take")
	}
	ok, wait := b.take(now)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("second take: %v %v", ok, wait)
	}
	if ok, _ := b.take(now.Add(100 * time.Millisecond)); !ok {
		t.Fatal("no refill")
	}
	if ok, _ := b.take(now.Add(10 * time.Second)); !ok {
		t.Fatal("no refill after idle")
	}
	if ok, _ := b.take(now.Add(10 * time.Second)); ok {
		t.Fatal("burst exceeded")
	}
}

func TestGlobalLatencyAndAdmin(t *testing.T) {
	e := newTestEnv(t, Options{})
	r := e.admin("PUT", "/admin/global", `{"latency":"30ms"}`)
	expectStatus(t, r, 200)
	r = e.admin("GET", "/admin/global", nil)
	if got := strings.TrimSpace(string(r.body)); got != `{"latency":"30ms","rateLimit":0,"burst":0}` {
		t.Fatalf("global %s", got)
	}
	start := time.Now()
	expectStatus(t, e.api("GET", "/v1/zones", nil), 200)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("took %v", d)
	}
	// Faults are cleared separately from the global settings.
	e.cloud.ClearFaults()
	if e.cloud.Global().Latency != 30*time.Millisecond {
		t.Fatal("ClearFaults reset the global latency")
	}
	for _, body := range []string{`{"latency":"x"}`, `{"rateLimit":-1}`, `{"burst":-1}`, `{"rps":1}`} {
		expectStatus(t, e.admin("PUT", "/admin/global", body), 400)
	}
	e.cloud.Reset()
	if e.cloud.Global() != (Global{}) {
		t.Fatal("Reset kept the global settings")
	}
}

// TestAbandonedWriteHasNoEffect: a client that gives up while its write is
// held by injected latency leaves the cloud unchanged, as the README says.
func TestAbandonedWriteHasNoEffect(t *testing.T) {
	e := newTestEnv(t, Options{})
	if _, err := e.cloud.SetFault(Fault{Name: "slow", Route: "POST /v1/loadbalancers", Latency: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(lbBody("abandoned"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/loadbalancers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request completed despite the client timeout")
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok := e.cloud.LoadBalancer("abandoned"); ok {
		t.Fatal("the abandoned create took effect")
	}
}
