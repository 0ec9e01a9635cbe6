package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"k8s.io/component-base/metrics/testutil"

	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

// TestRefusedRequestsCostNoToken: requests the host refuses take nothing
// from the rate budget. The budget has room for one request an hour; after
// each kind of refused request, sent several times, a valid request still
// goes at once.
func TestRefusedRequestsCostNoToken(t *testing.T) {
	var sent atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer api.Close()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	dir := credentialstest.SecretDir(t, map[string]string{"token": "s3cret"})
	named := func(headers ...abi.Header) []abi.Header {
		return append([]abi.Header{{Name: abi.HeaderCredential, Value: "token"}}, headers...)
	}
	cases := []struct {
		name string
		req  abi.HTTPRequest
	}{
		{"credential not granted", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "admin"}}}},
		{"credential not bound to the origin", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "elsewhere"}}}},
		{"unknown reserved header", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderPrefix + "Bogus", Value: "1"}}}},
		{"credential's header set by the module", abi.HTTPRequest{Headers: named(abi.Header{Name: "Authorization", Value: "Bearer mine"})}},
		{"sigv4 header without a credential", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderSigV4Region, Value: "eu-west-1"}}}},
		{"invalid header name", abi.HTTPRequest{Headers: named(abi.Header{Name: "X Bad", Value: "1"})}},
		{"header value with a line break", abi.HTTPRequest{Headers: named(abi.Header{Name: "X-Note", Value: "a\r\nX-Injected: 1"})}},
		{"invalid method", abi.HTTPRequest{Method: "GET /", Headers: named()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent.Store(0)
			budget, err := NewRateBudget([]RateLimit{{Origin: api.URL, PerHour: 1}}, []string{api.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Name: "refused",
				HTTP: HTTPConfig{AllowedOrigins: []string{api.URL, other.URL}, Budget: budget},
				Credentials: credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
					{Name: "token", Origins: []string{api.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
					{Name: "elsewhere", Origins: []string{other.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
				}},
			}.withDefaults()
			store, _ := credentials.NewStore(cfg.Credentials)
			if cfg.HTTP.auth, err = newModuleAuthenticator(cfg, store); err != nil {
				t.Fatal(err)
			}
			h, err := newHTTPClient(cfg.Name, cfg.HTTP)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			refused := tc.req
			refused.URL = api.URL + "/servers"
			for range 3 {
				if resp := h.do(ctx, &refused); resp.Error == "" {
					t.Fatalf("answered %d %q, want the host's refusal", resp.StatusCode, resp.Body)
				}
			}
			if n := sent.Load(); n != 0 {
				t.Fatalf("%d refused requests reached the cloud", n)
			}
			start := time.Now()
			resp := h.do(ctx, &abi.HTTPRequest{URL: api.URL + "/servers", Headers: named()})
			if resp.StatusCode != http.StatusOK || time.Since(start) > time.Second {
				t.Fatalf("valid request after the refused ones answered %d %q %q after %v; want 200 at once: the refused ones took its token",
					resp.StatusCode, resp.Error, resp.Body, time.Since(start))
			}
		})
	}
}

// TestShadowTakesOnlySpareRoom: a shadow's request goes only at once and
// with at least half the burst left after it, books no later token when
// refused, and gets nothing from a burst of 1 or while the cloud says the
// quota is low; the module in service then still has its reserve.
func TestShadowTakesOnlySpareRoom(t *testing.T) {
	b := testBucket(t, 10, 10)
	for i := range 5 {
		if _, ok := b.reserve(t0, time.Time{}, true); !ok {
			t.Fatalf("shadow request %d refused with %d of 10 tokens free", i, 10-i)
		}
	}
	at, ok := b.reserve(t0, time.Time{}, true)
	if ok || at != t0.Add(ms(100)) {
		t.Fatalf("shadow request with half the burst left: at %v ok %v, want refused, room again in 100ms", at.Sub(t0), ok)
	}
	for i := range 5 {
		if at, ok := b.reserve(t0, time.Time{}, false); !ok || at != t0 {
			t.Fatalf("in-service request %d: at %v ok %v, want at once: the shadow took the reserve", i, at.Sub(t0), ok)
		}
	}

	single := testBucket(t, 10, 1)
	if _, ok := single.reserve(t0, time.Time{}, true); ok {
		t.Fatal("a shadow took the only token of a burst of 1")
	}
	if at, ok := single.reserve(t0, time.Time{}, false); !ok || at != t0 {
		t.Fatalf("in-service request after the shadow's refusal: at %v ok %v, want at once", at.Sub(t0), ok)
	}

	paced := testBucket(t, 10, 10)
	paced.observe(t0, http.StatusOK, quotaHeader(100, 1, t0.Add(time.Minute)))
	if _, ok := paced.reserve(t0, time.Time{}, true); ok {
		t.Fatal("a shadow's request went while the cloud says the quota is low")
	}
}

// TestSetShadow: a module started in shadow sends nothing where the budget
// has no spare room, and its call's answer is withheld; promoted, it waits
// for its token as the module in service does.
func TestSetShadow(t *testing.T) {
	var sent atomic.Int32
	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Add(1) }))
	defer cloud.Close()
	budget, err := NewRateBudget([]RateLimit{{Origin: cloud.URL, PerSecond: 20}}, []string{cloud.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, err := New(ctx, requestModule(false, &abi.HTTPRequest{URL: cloud.URL}), Config{Name: "candidate",
		HTTP: HTTPConfig{AllowedOrigins: []string{cloud.URL}, Budget: budget, Shadow: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	call := func() {
		if err := mod.Call(ctx, abi.ExportInstanceShutdown, &abi.Node{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := mod.Call(ctx, abi.ExportInstanceShutdown, &abi.Node{}, nil); !errors.Is(err, ErrShadowThrottled) {
		t.Fatalf("in shadow, with a burst of 1, the call returned %v, want ErrShadowThrottled", err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("in shadow, with a burst of 1, the module sent %d requests", n)
	}
	mod.SetShadow(false)
	call()
	call()
	if n := sent.Load(); n != 2 {
		t.Fatalf("promoted, the module sent %d of 2 requests", n)
	}
}

// TestShadowThrottledCallIsWithheld: a call of a module in shadow during
// which the budget refused one of its requests returns
// ErrShadowThrottled, with its own reason, although the module answered
// OK; its instance serves the next call. Calls whose requests went, in
// shadow or promoted, answer as usual.
func TestShadowThrottledCallIsWithheld(t *testing.T) {
	var sent atomic.Int32
	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Add(1) }))
	defer cloud.Close()
	// Four tokens and no refill within the test: a shadow may take two,
	// leaving half the burst.
	budget, err := NewRateBudget([]RateLimit{{Origin: cloud.URL, PerHour: 1, Burst: 4}}, []string{cloud.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const name = "withheld"
	mod, err := New(ctx, requestModule(false, &abi.HTTPRequest{URL: cloud.URL}), Config{Name: name, PoolSize: 1,
		HTTP: HTTPConfig{AllowedOrigins: []string{cloud.URL}, Budget: budget, Shadow: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	call := func() error { return mod.Call(ctx, abi.ExportInstanceShutdown, &abi.Node{}, nil) }
	for i := range 2 {
		if err := call(); err != nil {
			t.Fatalf("shadow call %d with spare room: %v", i, err)
		}
	}
	first := mod.pool.idle[0]
	err = call()
	var failure *FailureError
	if !errors.Is(err, ErrShadowThrottled) || !errors.As(err, &failure) || failure.Reason != ReasonShadowThrottled {
		t.Fatalf("shadow call refused a request returned %v, want ErrShadowThrottled with reason %s", err, ReasonShadowThrottled)
	}
	if n := sent.Load(); n != 2 {
		t.Fatalf("%d requests reached the cloud, want the shadow's first 2", n)
	}
	if replaced, _ := testutil.GetCounterMetricValue(instancesReplaced.WithLabelValues(name, ReasonShadowThrottled)); replaced != 0 || len(mod.pool.idle) != 1 || mod.pool.idle[0] != first {
		t.Fatalf("the instance was replaced (%v replacements): a withheld answer says nothing against it", replaced)
	}
	mod.SetShadow(false)
	if err := call(); err != nil || sent.Load() != 3 {
		t.Fatalf("promoted, the call returned %v with %d requests sent, want its answer and 3", err, sent.Load())
	}
}

// httpDoImport is the http_do import, function index 0 of the modules that
// add it first.
var httpDoImport = wt.Import{Module: "wasmccm", Name: "http_do", Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}}

// requestModule assembles a module whose instance_shutdown makes the
// requests reqs, once or, with forever, again and again until its call's
// deadline ends it.
func requestModule(forever bool, reqs ...*abi.HTTPRequest) []byte {
	at := int32(4096) // clear of okEmpty's result at 2048
	var store, requests []byte
	for _, req := range reqs {
		enc := abi.Marshal(nil, req)
		store = wt.Seq(store, wt.StoreBytes(at, enc))
		requests = wt.Seq(requests, wt.I32Const(at), wt.I32Const(int32(len(enc))), wt.Call(0), wt.Drop)
		at += int32(len(enc))
	}
	if forever {
		requests = wt.Seq([]byte{0x03, 0x40}, requests, []byte{0x0c, 0x00, 0x0b}) // loop, br 0, end
	}
	return abiModule(okEmpty, func(m *wt.Module) {
		m.Imports = append(m.Imports, httpDoImport)
		m.Funcs[funcIndex(m, abi.ExportInstanceShutdown)].Body = wt.Seq(store, requests, okEmpty)
	})
}

// Parameters of the starvation measurement: the module in service makes
// one request per call, a call every starvePeriod, half the origin's
// rate, to a cloud that answers in starveCloudLatency. The hostile shadow
// runs starveShadowCalls calls at once, as many as a rollout's default
// shadow concurrency, each trying five times the origin's rate: between
// two requests, it asks another origin, which answers in
// starveShadowPause.
const (
	starveRate         = 100 // per second
	starveBurst        = 10
	starvePeriod       = 2 * time.Second / starveRate
	starveCloudLatency = 10 * time.Millisecond
	starveShadowPause  = time.Second / starveRate / 5
	starveShadowCalls  = 4
)

// inServiceP50 is the median latency of calls calls of a module in
// service whose requests go to an origin of the rate budget, while, with
// hostile, a module in shadow that shares the budget asks the same origin
// again and again in starveShadowCalls calls at once; waited is how long
// the requests to that origin waited for the budget in all.
//
// The shadow's pauses keep it from taking a core for itself: a module that
// spins takes CPU from the module in service, whatever the budget does
// (calls are bounded by the pool and the call timeout, not by the budget),
// and the measure is of the budget.
func inServiceP50(t testing.TB, calls int, hostile bool) (p50, waited time.Duration) {
	sleeper := func(d time.Duration) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(d) }))
		t.Cleanup(srv.Close)
		return srv
	}
	cloud, elsewhere := sleeper(starveCloudLatency), sleeper(starveShadowPause)
	allowed := []string{cloud.URL, elsewhere.URL}
	budget, err := NewRateBudget([]RateLimit{{Origin: cloud.URL, PerSecond: starveRate, Burst: starveBurst}}, allowed, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := &abi.HTTPRequest{URL: cloud.URL + "/servers"}
	inService, err := New(ctx, requestModule(false, req), Config{Name: "in-service", PoolSize: 1,
		HTTP: HTTPConfig{AllowedOrigins: allowed, Budget: budget}})
	if err != nil {
		t.Fatal(err)
	}
	defer inService.Close(ctx)
	if hostile {
		// The shadow's calls loop until the measure ends; under a budget
		// that let them wait, each would keep a token booked ahead, up to
		// a second before its deadline, 30 s away. They opt out of
		// coalescing, which would make their requests one.
		hammer := &abi.HTTPRequest{URL: req.URL, Headers: []abi.Header{{Name: "Cache-Control", Value: "no-cache"}}}
		shadow, err := New(ctx, requestModule(true, hammer, &abi.HTTPRequest{URL: elsewhere.URL}), Config{Name: "shadow", PoolSize: starveShadowCalls,
			HTTP: HTTPConfig{AllowedOrigins: allowed, Budget: budget, Shadow: true}})
		if err != nil {
			t.Fatal(err)
		}
		stop, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range starveShadowCalls {
			wg.Go(func() {
				for stop.Err() == nil {
					shadow.Call(stop, abi.ExportInstanceShutdown, &abi.Node{}, nil)
				}
			})
		}
		defer func() {
			cancel()
			wg.Wait()
			shadow.Close(ctx)
		}()
	}
	latencies := make([]time.Duration, 0, calls)
	next := time.Now()
	for range calls {
		time.Sleep(time.Until(next))
		next = next.Add(starvePeriod)
		start := time.Now()
		if err := inService.Call(ctx, abi.ExportInstanceShutdown, &abi.Node{}, nil); err != nil {
			t.Fatal(err)
		}
		latencies = append(latencies, time.Since(start))
	}
	slices.Sort(latencies)
	seconds, err := testutil.GetHistogramMetricValue(httpRateWait.WithLabelValues(mustOrigin(t, cloud.URL).String()))
	if err != nil {
		t.Fatal(err)
	}
	return latencies[len(latencies)/2], time.Duration(seconds * float64(time.Second))
}

// TestShadowCannotStarveModuleInService: a module in shadow that sends
// request after request to the origin the module in service uses, sharing
// its rate budget, never makes the in-service module's requests wait for
// the budget, and does not slow its calls.
func TestShadowCannotStarveModuleInService(t *testing.T) {
	registerMetrics()
	const calls = 100
	alone, _ := inServiceP50(t, calls, false)
	withShadow, waited := inServiceP50(t, calls, true)
	t.Logf("in-service call p50: %v alone, %v with a hostile shadow", alone, withShadow)
	if waited > 0 {
		t.Errorf("with a hostile shadow, requests waited %v in all for the budget: the shadow's never wait, the in-service module's must not", waited)
	}
	// The waits are the guarantee; latency also moves with the load of
	// the machine that runs the test, so it is held only to what tells a
	// starved module (several times slower) from one that is not, and the
	// tenth is measured by BenchmarkShadowStarvation.
	if withShadow > 2*alone {
		t.Fatalf("in-service call p50 %v with a hostile shadow, %v without", withShadow, alone)
	}
}

// BenchmarkShadowStarvation reports the in-service module's median call
// latency with and without a hostile shadow (TestShadowCannotStarveModuleInService).
func BenchmarkShadowStarvation(b *testing.B) {
	registerMetrics()
	var alone, withShadow time.Duration
	for b.Loop() {
		alone, _ = inServiceP50(b, 200, false)
		withShadow, _ = inServiceP50(b, 200, true)
	}
	b.ReportMetric(alone.Seconds()*1e3, "p50-ms-alone")
	b.ReportMetric(withShadow.Seconds()*1e3, "p50-ms-with-shadow")
}

// TestCoalescingConfusion: a request crafted so that its fields, joined
// with the old key's separators, read as another request's does not share
// that request's response while both are in flight. The crafted one puts
// the separator in a header value; the host refuses it, and the request it
// imitates gets the cloud's answer to itself.
func TestCoalescingConfusion(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Write([]byte("answer to " + r.Header.Get("X-Tenant") + "/" + r.Header.Get("X-Role")))
	}))
	defer srv.Close()
	defer close(release)
	h, err := newHTTPClient("t", Config{HTTP: HTTPConfig{AllowedOrigins: []string{srv.URL}}}.withDefaults().HTTP)
	if err != nil {
		t.Fatal(err)
	}
	genuine := &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers",
		Headers: []abi.Header{{Name: "X-Tenant", Value: "a"}, {Name: "X-Role", Value: "admin"}}}
	crafted := &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers",
		Headers: []abi.Header{{Name: "X-Tenant", Value: "a\x00X-Role\x00admin"}}}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	genuineResp := make(chan *abi.HTTPResponse, 1)
	go func() { genuineResp <- h.do(ctx, genuine) }()
	<-arrived
	craftedResp := make(chan *abi.HTTPResponse, 1)
	go func() { craftedResp <- h.do(ctx, crafted) }()
	var got *abi.HTTPResponse
	select {
	case got = <-craftedResp:
	case <-time.After(time.Second):
		// It joined the genuine request's flight: let that one finish.
	}
	release <- struct{}{}
	if got == nil {
		got = <-craftedResp
	}
	want := <-genuineResp
	if want.StatusCode != http.StatusOK || string(want.Body) != "answer to a/admin" {
		t.Fatalf("genuine request answered %d %q %q", want.StatusCode, want.Body, want.Error)
	}
	if got.StatusCode == want.StatusCode && string(got.Body) == string(want.Body) {
		t.Fatalf("the crafted request shared the genuine one's response %q", got.Body)
	}
	if got.Error == "" {
		t.Errorf("the crafted request, whose header holds a NUL, was answered %d %q; want it refused", got.StatusCode, got.Body)
	}
}

// TestCoalesceKeyDistinct: requests that differ in any field the cloud
// sees have different keys, however their fields are split.
func TestCoalesceKeyDistinct(t *testing.T) {
	url := "https://api.example/servers"
	hs := func(kv ...string) []abi.Header {
		var out []abi.Header
		for i := 0; i < len(kv); i += 2 {
			out = append(out, abi.Header{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	requests := []*abi.HTTPRequest{
		{Method: "GET", URL: url},
		{Method: "HEAD", URL: url},
		{Method: "GET", URL: url + "?page=2"},
		{Method: "GET", URL: url, Headers: hs("A", "1", "B", "2")},
		{Method: "GET", URL: url, Headers: hs("A", "1\x00B\x002")},
		{Method: "GET", URL: url, Headers: hs("A\x001\x00B", "2")},
		{Method: "GET", URL: url, Headers: hs("A", "1\x00B", "2", "")},
		{Method: "GET", URL: url, Headers: hs(abi.HeaderCredential, "reader")},
		{Method: "GET", URL: url, Headers: hs(abi.HeaderCredential, "admin")},
		{Method: "GET", URL: url + "\x00" + abi.HeaderCredential + "\x00admin"},
	}
	seen := map[string]int{}
	for i, req := range requests {
		key, ok := coalesceKey(req)
		if !ok {
			t.Fatalf("request %d is not coalescable", i)
		}
		if j, dup := seen[key]; dup {
			t.Errorf("requests %d and %d share the key %q", j, i, strings.ReplaceAll(key, "\x00", `\0`))
		}
		seen[key] = i
	}
}
