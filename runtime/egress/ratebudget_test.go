package egress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/origin"
)

func TestNewRateBudget(t *testing.T) {
	allowed := []string{"https://api.example.com", "http://127.0.0.1:8780"}
	cases := []struct {
		name   string
		limits []cloudconfig.RateLimit
		want   string // "" accepted
	}{
		{"per hour", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 3600}}, ""},
		{"per second, normalised origin", []cloudconfig.RateLimit{{Origin: "HTTPS://API.example.com:443/", PerSecond: 5, Burst: 10}}, ""},
		{"two origins", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 1}, {Origin: "http://127.0.0.1:8780", PerSecond: 1}}, ""},
		{"not allowed", []cloudconfig.RateLimit{{Origin: "https://other.example.com", PerHour: 1}}, "https://other.example.com:443 is not in http.allowedOrigins"},
		{"path", []cloudconfig.RateLimit{{Origin: "https://api.example.com/v1", PerHour: 1}}, "only scheme://host[:port]"},
		{"no rate", []cloudconfig.RateLimit{{Origin: "https://api.example.com"}}, "exactly one of perHour and perSecond"},
		{"both rates", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 1, PerSecond: 1}}, "exactly one of perHour and perSecond"},
		{"negative rate", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: -1, PerSecond: 1}}, "exactly one of perHour and perSecond"},
		{"rate too high", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerSecond: cloudconfig.MaxRate + 1}}, "exceeds 1000000 requests per second"},
		{"negative burst", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 1, Burst: -1}}, "burst -1 is outside"},
		{"quota headers alone", []cloudconfig.RateLimit{{Origin: "https://api.example.com", QuotaHeaders: cloudconfig.QuotaSliding}}, ""},
		{"quota headers and a rate", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 5000, QuotaHeaders: cloudconfig.QuotaRefill}}, ""},
		{"unknown quota headers", []cloudconfig.RateLimit{{Origin: "https://api.example.com", QuotaHeaders: "fixed"}}, `quotaHeaders "fixed" is neither "refill" nor "sliding"`},
		{"twice", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerHour: 1}, {Origin: "https://api.example.com:443", PerHour: 2}}, "rateLimits[1]: origin https://api.example.com:443 is listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRateBudget("test", tc.limits, allowed, nil)
			if tc.want == "" {
				if err != nil || len(r.buckets) != len(tc.limits) {
					t.Fatalf("got %v, %v; want %d buckets", r, err, len(tc.limits))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if r, err := NewRateBudget("test", nil, allowed, nil); r != nil || err != nil {
		t.Fatalf("no limits: %v, %v; want a nil budget", r, err)
	}
}

// testBucket is the bucket of one limit on https://api.example.com.
func testBucket(t *testing.T, perSecond, burst int) *bucket {
	return testBucketOf(t, cloudconfig.RateLimit{PerSecond: perSecond, Burst: burst})
}

// testBucketOf is the bucket of l, for origin https://api.example.com.
func testBucketOf(t *testing.T, l cloudconfig.RateLimit) *bucket {
	t.Helper()
	l.Origin = "https://api.example.com"
	r, err := NewRateBudget("test", []cloudconfig.RateLimit{l}, []string{l.Origin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.buckets["https://api.example.com:443"]
}

// t0 is a whole Unix second, so that RateLimit-Reset values are exact.
var t0 = time.Unix(1_700_000_000, 0)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestRateBucketPaces(t *testing.T) {
	cases := []struct {
		name             string
		perSecond, burst int
		arrivals, sends  []time.Duration // offsets from t0
	}{
		{"burst then paced", 10, 3, []time.Duration{0, 0, 0, 0, 0}, []time.Duration{0, 0, 0, ms(100), ms(200)}},
		{"evenly spaced without burst", 1, 0, []time.Duration{0, 0, ms(2500)}, []time.Duration{0, ms(1000), ms(2500)}},
		{"a quiet spell refills the burst", 10, 2, []time.Duration{0, 0, ms(1000), ms(1000), ms(1000)}, []time.Duration{0, 0, ms(1000), ms(1000), ms(1100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := testBucket(t, tc.perSecond, tc.burst)
			for i, arrival := range tc.arrivals {
				at, ok := b.reserve(t0.Add(arrival), time.Time{}, false)
				if !ok || at.Sub(t0) != tc.sends[i] {
					t.Fatalf("request %d arriving at %v: sent at %v (ok %v), want %v", i, arrival, at.Sub(t0), ok, tc.sends[i])
				}
			}
		})
	}
}

// TestRateBucketDeadline: a request that could not go before its latest
// time is refused and takes no token, so the next one is not pushed back.
func TestRateBucketDeadline(t *testing.T) {
	b := testBucket(t, 1, 1)
	if _, ok := b.reserve(t0, t0.Add(ms(10)), false); !ok {
		t.Fatal("a request needing no wait was refused")
	}
	if at, ok := b.reserve(t0, t0.Add(ms(500)), false); ok || at != t0.Add(time.Second) {
		t.Fatalf("request due at %v with 500ms left: ok %v, want refused", at.Sub(t0), ok)
	}
	if at, ok := b.reserve(t0, t0.Add(2*time.Second), false); !ok || at != t0.Add(time.Second) {
		t.Fatalf("next request: at %v ok %v, want 1s: the refusal took a token", at.Sub(t0), ok)
	}
}

func quotaHeader(limit, remaining int, reset time.Time) http.Header {
	h := http.Header{}
	h.Set("RateLimit-Limit", strconv.Itoa(limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	return h
}

type response struct {
	status int
	header http.Header
}

// TestRateBucketFollowsTheCloud applies responses at t0 to a bucket of 100
// requests per second (10 ms apart), then sends two requests at start and
// checks the gap between them.
func TestRateBucketFollowsTheCloud(t *testing.T) {
	retryAt := func(v string) http.Header { h := http.Header{}; h.Set("Retry-After", v); return h }
	cases := []struct {
		name      string
		perSecond int
		responses []response
		start     time.Duration
		// first is when the first request goes, gap the interval to the
		// second.
		first, gap time.Duration
		// quotaHeaders is the bucket's cloudconfig.RateLimit.QuotaHeaders.
		quotaHeaders string
	}{
		{"no headers", 100, []response{{200, nil}}, 0, 0, ms(10), ""},
		{"plenty remaining", 100, []response{{200, quotaHeader(3600, 3000, t0.Add(600*time.Second))}}, 0, 0, ms(10), ""},
		// Hetzner near its limit: 100 left, full in 3500 s: one refills a second.
		{"low remaining paces at the refill", 100, []response{{200, quotaHeader(3600, 100, t0.Add(3500*time.Second))}}, 0, 0, time.Second, ""},
		{"nothing remaining", 100, []response{{200, quotaHeader(3600, 0, t0.Add(3600*time.Second))}}, 0, 0, time.Second, ""},
		{"never faster than configured", 1, []response{{200, quotaHeader(1000, 50, t0.Add(95*time.Second))}}, 0, 0, time.Second, ""},
		{"pacing ends at reset", 100, []response{{200, quotaHeader(100, 5, t0.Add(10*time.Second))}}, ms(11000), 0, ms(10), ""},
		{"recovery ends pacing", 100, []response{{200, quotaHeader(3600, 100, t0.Add(3500*time.Second))}, {200, quotaHeader(3600, 400, t0.Add(3200*time.Second))}}, 0, 0, ms(10), ""},
		{"a response without headers keeps pacing", 100, []response{{200, quotaHeader(3600, 100, t0.Add(3500*time.Second))}, {200, nil}}, 0, 0, time.Second, ""},
		{"reset in the past", 100, []response{{200, quotaHeader(60, 0, time.Unix(53, 0))}}, 0, 0, ms(10), ""},
		{"429 with Retry-After", 100, []response{{429, retryAt("30")}}, 0, 30 * time.Second, ms(10), ""},
		{"429 with an HTTP date", 100, []response{{429, retryAt(t0.Add(20 * time.Second).UTC().Format(http.TimeFormat))}}, 0, 20 * time.Second, ms(10), ""},
		{"429 waits for one refill, not for Reset", 100, []response{{429, quotaHeader(3600, 0, t0.Add(3600*time.Second))}}, 0, time.Second, time.Second, ""},
		{"429 without headers", 100, []response{{429, nil}}, 0, time.Second, ms(10), ""},
		{"Retry-After is capped", 100, []response{{429, retryAt("999999999999")}}, 0, maxCloudDelay, ms(10), ""},
		// DigitalOcean: 5,000 an hour in a sliding window, the oldest
		// request leaving it 2 s from now.
		{"sliding: plenty remaining", 100, []response{{200, quotaHeader(5000, 4000, t0.Add(2*time.Second))}}, 0, 0, ms(10), cloudconfig.QuotaSliding},
		{"sliding: low remaining paces at the window's average", 100, []response{{200, quotaHeader(5000, 100, t0.Add(2*time.Second))}}, 0, 0, ms(720), cloudconfig.QuotaSliding},
		{"sliding: pacing outlasts a near Reset", 100, []response{{200, quotaHeader(5000, 0, t0.Add(time.Second))}}, ms(1500), 0, ms(720), cloudconfig.QuotaSliding},
		{"sliding: 429 waits for the oldest to leave", 100, []response{{429, quotaHeader(5000, 0, t0.Add(3*time.Second))}}, 0, 3 * time.Second, ms(720), cloudconfig.QuotaSliding},
		{"headers alone: no pace of our own", 0, []response{{200, quotaHeader(5000, 4000, t0.Add(2*time.Second))}}, 0, 0, 0, cloudconfig.QuotaSliding},
		{"headers alone: the cloud's pace", 0, []response{{200, quotaHeader(5000, 100, t0.Add(2*time.Second))}}, 0, 0, ms(720), cloudconfig.QuotaSliding},
		{"headers alone: a 429 pauses", 0, []response{{429, quotaHeader(5000, 0, t0.Add(3*time.Second))}}, 0, 3 * time.Second, ms(720), cloudconfig.QuotaSliding},
		{"sliding: Retry-After wins", 100, []response{{429, func() http.Header {
			h := quotaHeader(5000, 0, t0.Add(3*time.Second))
			h.Set("Retry-After", "10")
			return h
		}()}}, 0, 10 * time.Second, ms(720), cloudconfig.QuotaSliding},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := testBucketOf(t, cloudconfig.RateLimit{PerSecond: tc.perSecond, QuotaHeaders: tc.quotaHeaders})
			for _, r := range tc.responses {
				b.observe(t0, r.status, r.header)
			}
			start := t0.Add(tc.start)
			first, _ := b.reserve(start, time.Time{}, false)
			second, _ := b.reserve(start, time.Time{}, false)
			if first.Sub(start) != tc.first || second.Sub(first) != tc.gap {
				t.Fatalf("first request after %v, then %v; want %v, then %v", first.Sub(start), second.Sub(first), tc.first, tc.gap)
			}
		})
	}
}

// TestRateBucketLowQuotaStopsBurst: a bucket configured like the cloud's
// quota (Hetzner's 3,600 an hour, burst 3,600) still has burst left when
// the cloud says only a few requests remain, as happens when the two
// drift or other clients share the quota: it then goes at the cloud's
// refill, not at once.
func TestRateBucketLowQuotaStopsBurst(t *testing.T) {
	b := testBucket(t, 1, 3600)
	b.observe(t0, 200, quotaHeader(3600, 50, t0.Add(3550*time.Second)))
	first, _ := b.reserve(t0, time.Time{}, false)
	second, _ := b.reserve(t0, time.Time{}, false)
	if first != t0 || second.Sub(first) != time.Second {
		t.Fatalf("requests at %v and %v, want 0 and 1s", first.Sub(t0), second.Sub(t0))
	}
}

func TestThrottleReportsOncePerMinute(t *testing.T) {
	var reports int
	r, err := NewRateBudget("test", []cloudconfig.RateLimit{{Origin: "https://api.example.com", PerSecond: 1}}, []string{"https://api.example.com"}, func(Throttle) { reports++ })
	if err != nil {
		t.Fatal(err)
	}
	b := r.buckets["https://api.example.com:443"]
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {30 * time.Second, false}, {59 * time.Second, false}, {60 * time.Second, true}, {61 * time.Second, false}} {
		before := reports
		r.report(b, t0.Add(c.at), ThrottledByHost, time.Second)
		if got := reports > before; got != c.want {
			t.Errorf("report at %v: %v, want %v", c.at, got, c.want)
		}
	}
}

// budgetServer counts requests and answers each with respond.
func budgetServer(t *testing.T, respond func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		respond(w)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

type throttles struct {
	mu  sync.Mutex
	got []Throttle
}

func (r *throttles) report(t Throttle) { r.mu.Lock(); r.got = append(r.got, t); r.mu.Unlock() }

func (r *throttles) list() []Throttle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Throttle(nil), r.got...)
}

// TestRateBudgetThrottles sends two requests through the http_do path with
// 2 s left in the call, after a first response from the test's cloud: the
// second is refused without being sent, whether the configured rate, the
// cloud's headers or its 429 hold it back.
func TestRateBudgetThrottles(t *testing.T) {
	RegisterMetrics()
	cases := []struct {
		name    string
		limit   cloudconfig.RateLimit
		respond func(w http.ResponseWriter)
		// retryAfter is the least Retry-After of the host's 429.
		retryAfter int
		byCloud    float64
	}{
		{"configured rate", cloudconfig.RateLimit{PerHour: 1}, func(w http.ResponseWriter) {}, 3600, 0},
		{"low remaining", cloudconfig.RateLimit{PerSecond: 100}, func(w http.ResponseWriter) {
			// 0 left of 10, full in 100 s: the next one in 10 s.
			for k, v := range quotaHeader(10, 0, time.Now().Add(100*time.Second)) {
				w.Header()[k] = v
			}
		}, 9, 0},
		{"cloud 429", cloudconfig.RateLimit{PerSecond: 100}, func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}, 29, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, sent := budgetServer(t, tc.respond)
			var reports throttles
			tc.limit.Origin = srv.URL
			budget, err := NewRateBudget("budgeted", []cloudconfig.RateLimit{tc.limit}, []string{srv.URL}, reports.report)
			if err != nil {
				t.Fatal(err)
			}
			h, err := New("t", Config{AllowedOrigins: []string{srv.URL}, Budget: budget}, nil)
			if err != nil {
				t.Fatal(err)
			}
			label := mustOrigin(t, srv.URL).String()
			hostBefore, _ := testutil.GetCounterMetricValue(httpThrottled.WithLabelValues("budgeted", label, ThrottledByHost))
			cloudBefore, _ := testutil.GetCounterMetricValue(httpThrottled.WithLabelValues("budgeted", label, ThrottledByCloud))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if resp := answer(ctx, h, &abi.HTTPRequest{URL: srv.URL + "/a"}); resp.Error != "" {
				t.Fatal(resp.Error)
			}
			start := time.Now()
			resp := answer(ctx, h, &abi.HTTPRequest{URL: srv.URL + "/b"})
			if waited := time.Since(start); waited > time.Second {
				t.Errorf("the refusal took %v: it must not wait", waited)
			}
			after, _ := strconv.Atoi(resp.Header("Retry-After"))
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header(HeaderThrottled) != ThrottledByHost || after < tc.retryAfter || len(resp.Body) == 0 {
				t.Fatalf("second request answered %d, Retry-After %q, %s %q, body %q; want the host's 429 with Retry-After >= %d",
					resp.StatusCode, resp.Header("Retry-After"), HeaderThrottled, resp.Header(HeaderThrottled), resp.Body, tc.retryAfter)
			}
			if n := sent.Load(); n != 1 {
				t.Fatalf("the cloud got %d requests, want 1: the throttled one must not be sent", n)
			}
			hostAfter, _ := testutil.GetCounterMetricValue(httpThrottled.WithLabelValues("budgeted", label, ThrottledByHost))
			cloudAfter, _ := testutil.GetCounterMetricValue(httpThrottled.WithLabelValues("budgeted", label, ThrottledByCloud))
			if hostAfter-hostBefore != 1 || cloudAfter-cloudBefore != tc.byCloud {
				t.Errorf("throttled by host +%v, by cloud +%v; want +1, +%v", hostAfter-hostBefore, cloudAfter-cloudBefore, tc.byCloud)
			}
			// The series are the budget's module's: another module reaching
			// the same origin has a budget, and counts, of its own.
			if other, _ := testutil.GetCounterMetricValue(httpThrottled.WithLabelValues("other", label, ThrottledByHost)); other != 0 {
				t.Errorf("module other counted %v throttled requests it never made", other)
			}
			// One report a minute: the cloud's 429, if any, is the one.
			want := ThrottledByHost
			if tc.byCloud > 0 {
				want = ThrottledByCloud
			}
			if got := reports.list(); len(got) != 1 || got[0].By != want || got[0].Origin != label {
				t.Fatalf("reports %+v, want one by %s for %s", got, want, label)
			}
		})
	}
}

func mustOrigin(t testing.TB, s string) origin.Origin {
	t.Helper()
	list, err := ParseAllowedOrigins([]string{s})
	if err != nil || len(list) != 1 {
		t.Fatal(s, err)
	}
	for o := range list {
		return o
	}
	panic("unreachable")
}

// TestRateBudgetWaitsWithinDeadline: a request the budget can fit before
// the deadline waits for its token and is sent.
func TestRateBudgetWaitsWithinDeadline(t *testing.T) {
	srv, sent := budgetServer(t, func(w http.ResponseWriter) {})
	budget, err := NewRateBudget("test", []cloudconfig.RateLimit{{Origin: srv.URL, PerSecond: 10}}, []string{srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New("t", Config{AllowedOrigins: []string{srv.URL}, Budget: budget}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	for range 3 {
		if resp := answer(ctx, h, &abi.HTTPRequest{Method: "POST", URL: srv.URL}); resp.StatusCode != http.StatusOK {
			t.Fatalf("answered %d %q", resp.StatusCode, resp.Error)
		}
	}
	if elapsed := time.Since(start); elapsed < ms(190) {
		t.Fatalf("3 requests at 10/s took %v, want at least 200ms", elapsed)
	}
	if n := sent.Load(); n != 3 {
		t.Fatalf("the cloud got %d requests, want 3", n)
	}
}

// TestRateBudgetWaitEndsWithTheCall: a call that ends while its request
// waits for the budget gets an error, not a request sent after it ended.
func TestRateBudgetWaitEndsWithTheCall(t *testing.T) {
	const o = "https://api.example.com"
	budget, err := NewRateBudget("test", []cloudconfig.RateLimit{{Origin: o, PerSecond: 1}}, []string{o}, nil)
	if err != nil {
		t.Fatal(err)
	}
	label := mustOrigin(t, o).String()
	if resp, _ := budget.wait(context.Background(), label, time.Second, false); resp != nil {
		t.Fatalf("first request held: %+v", resp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(ms(50), cancel)
	start := time.Now()
	resp, code := budget.wait(ctx, label, time.Second, false)
	if resp == nil || resp.Error == "" || code != "timeout" || time.Since(start) > ms(900) {
		t.Fatalf("wait after the call ended: %+v, %q after %v; want an error at once", resp, code, time.Since(start))
	}
}

// BenchmarkRateBudgetWait is the cost a budget adds to a request that
// does not wait: an origin with a limit and room, and one without.
func BenchmarkRateBudgetWait(b *testing.B) {
	RegisterMetrics()
	limited := "https://api.example.com"
	budget, err := NewRateBudget("test", []cloudconfig.RateLimit{{Origin: limited, PerSecond: 1}}, []string{limited, "https://other.example.com"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	// The bucket never runs dry, so that the loop measures the path and
	// not the waits of more than a million requests a second.
	never := budget.buckets[mustOrigin(b, limited).String()]
	never.interval, never.tau = 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range []struct{ name, origin string }{{"limited", limited}, {"unlimited", "https://other.example.com"}} {
		o := mustOrigin(b, bc.origin).String()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if resp, _ := budget.wait(ctx, o, time.Second, false); resp != nil {
					b.Fatal(resp.Error)
				}
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
