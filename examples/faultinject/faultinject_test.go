package faultinject

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// store is a tiny API for the tests: POST /v1/items/{name} creates an item
// (201, 409 if it exists), GET /v1/items lists them. The fault Set wraps
// each route, so Route selectors see the request's pattern.
type store struct {
	mu    sync.Mutex
	items map[string]bool
}

func newStore() *store { return &store{items: map[string]bool{}} }

func (s *store) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.items[name]
}

func (s *store) handler(faults *Set) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/items/{name}", faults.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.items[r.PathValue("name")] {
			writeError(w, http.StatusConflict, "exists")
			return
		}
		s.items[r.PathValue("name")] = true
		w.WriteHeader(http.StatusCreated)
	}), writeError))
	mux.Handle("GET /v1/items", faults.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}), writeError))
	mux.Handle("/", faults.Handler(http.NotFoundHandler(), writeError))
	return mux
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	w.Write([]byte(msg))
}

// serve sends "METHOD path" to h and returns the recorded response.
func serve(h http.Handler, req string) *httptest.ResponseRecorder {
	method, path, _ := strings.Cut(req, " ")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func mustAdd(t *testing.T, s *Set, f Fault) Fault {
	t.Helper()
	added, err := s.Add(f)
	if err != nil {
		t.Fatal(err)
	}
	return added
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
		fails []string // requests the fault applies to
		pass  []string
	}{
		{"everything", Fault{},
			[]string{"GET /v1/items", "POST /v1/items/a", "GET /nope"}, nil},
		{"method, any case", Fault{Method: "post"},
			[]string{"POST /v1/items/a"}, []string{"GET /v1/items"}},
		{"path prefix is a path, not a string prefix", Fault{PathPrefix: "/v1/items"},
			[]string{"GET /v1/items", "POST /v1/items/a"}, []string{"GET /v1/itemsx", "GET /v1"}},
		{"path prefix ending in a slash", Fault{PathPrefix: "/v1/items/"},
			[]string{"POST /v1/items/a"}, []string{"GET /v1/items"}},
		{"route pattern", Fault{Route: "POST /v1/items/{name}"},
			[]string{"POST /v1/items/a", "POST /v1/items/b"}, []string{"GET /v1/items", "GET /v1/items/a"}},
		{"query parameters, in any order among others", Fault{Query: "page=2"},
			[]string{"GET /v1/items?page=2", "GET /v1/items?per_page=50&page=2"}, []string{"GET /v1/items?page=1", "GET /v1/items"}},
		{"all selectors at once", Fault{Method: "GET", PathPrefix: "/v1", Route: "GET /v1/items"},
			[]string{"GET /v1/items"}, []string{"POST /v1/items/a", "GET /v1/other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var faults Set
			tt.fault.Always = true
			mustAdd(t, &faults, tt.fault)
			h := newStore().handler(&faults)
			for _, req := range tt.fails {
				if w := serve(h, req); w.Code != http.StatusServiceUnavailable {
					t.Errorf("%s: status %d, want the injected 503", req, w.Code)
				}
			}
			for _, req := range tt.pass {
				if w := serve(h, req); w.Code == http.StatusServiceUnavailable {
					t.Errorf("%s: injected, want it unmatched", req)
				}
			}
			if got := faults.Hits(); got != len(tt.fails) {
				t.Errorf("Hits %d, want %d", got, len(tt.fails))
			}
		})
	}
}

// TestErrorRateRepeatable: the failures an ErrorRate fault injects depend
// only on the seed and the request sequence.
func TestErrorRateRepeatable(t *testing.T) {
	run := func(seed uint64, rate float64) string {
		var faults Set
		faults.Reset(seed)
		mustAdd(t, &faults, Fault{ErrorRate: rate, Status: 500})
		h := newStore().handler(&faults)
		var b strings.Builder
		for range 64 {
			if serve(h, "GET /v1/items").Code == 500 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	tests := []struct {
		name             string
		seed             uint64
		rate             float64
		minFail, maxFail int
	}{
		{"never", 7, 0, 0, 0},
		{"always", 7, 1, 64, 64},
		{"half, seed 42", 42, 0.5, 16, 48},
		{"half, seed 43", 43, 0.5, 16, 48},
		{"a tenth", 42, 0.1, 1, 16},
	}
	outcomes := map[uint64]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := run(tt.seed, tt.rate), run(tt.seed, tt.rate)
			if a != b {
				t.Fatalf("same seed, different outcomes:\n%s\n%s", a, b)
			}
			if n := strings.Count(a, "x"); n < tt.minFail || n > tt.maxFail {
				t.Fatalf("%d/64 failures, want %d..%d: %s", n, tt.minFail, tt.maxFail, a)
			}
			if tt.rate == 0.5 {
				outcomes[tt.seed] = a
			}
		})
	}
	if outcomes[42] == outcomes[43] {
		t.Fatalf("seeds 42 and 43 fail the same requests: %s", outcomes[42])
	}
}

// TestAfterCommit: the request takes effect, the client gets the failure,
// and a retry sees the committed state.
func TestAfterCommit(t *testing.T) {
	tests := []struct {
		name           string
		fault          Fault
		wantStatus     int
		wantRetryAfter string
		wantCommitted  bool
	}{
		{"lost response", Fault{Route: "POST /v1/items/{name}", FailNext: 1, AfterCommit: true},
			503, "", true},
		{"lost response, throttled", Fault{Route: "POST /v1/items/{name}", FailNext: 1, AfterCommit: true, Status: 429},
			429, "1", true},
		{"lost response with Retry-After", Fault{FailNext: 1, AfterCommit: true, Status: 502, RetryAfter: 5},
			502, "5", true},
		{"failure before the request", Fault{Route: "POST /v1/items/{name}", FailNext: 1},
			503, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var faults Set
			st := newStore()
			h := st.handler(&faults)
			mustAdd(t, &faults, tt.fault)
			w := serve(h, "POST /v1/items/a")
			if w.Code != tt.wantStatus || w.Header().Get("Retry-After") != tt.wantRetryAfter {
				t.Fatalf("status %d, Retry-After %q; want %d, %q", w.Code, w.Header().Get("Retry-After"), tt.wantStatus, tt.wantRetryAfter)
			}
			if !strings.Contains(w.Body.String(), `injected fault "fault-1"`) {
				t.Fatalf("body %q does not name the fault", w.Body)
			}
			if st.has("a") != tt.wantCommitted {
				t.Fatalf("committed %v, want %v", st.has("a"), tt.wantCommitted)
			}
			retry := http.StatusCreated
			if tt.wantCommitted {
				retry = http.StatusConflict
			}
			if w := serve(h, "POST /v1/items/a"); w.Code != retry {
				t.Fatalf("retry: status %d, want %d", w.Code, retry)
			}
		})
	}
}

// TestDecideOrder: latencies of all matching faults add up; the first
// fault that fires decides, and later ones are not consumed.
func TestDecideOrder(t *testing.T) {
	var faults Set
	mustAdd(t, &faults, Fault{Name: "slow", Latency: 20 * time.Millisecond})
	mustAdd(t, &faults, Fault{Name: "first", FailNext: 1, Status: 502})
	mustAdd(t, &faults, Fault{Name: "second", FailNext: 1, Status: 504, Latency: 10 * time.Millisecond})
	mustAdd(t, &faults, Fault{Name: "other path", PathPrefix: "/v2", Always: true, Latency: time.Hour})
	req := httptest.NewRequest("GET", "/v1/items", nil)
	for i, want := range []struct {
		fault string
		delay time.Duration
	}{{"first", 30 * time.Millisecond}, {"second", 30 * time.Millisecond}, {"", 30 * time.Millisecond}} {
		d := faults.Decide(req)
		got := ""
		if d.Fault != nil {
			got = d.Fault.Name
		}
		if got != want.fault || d.Delay != want.delay {
			t.Fatalf("request %d: fault %q, delay %v; want %q, %v", i, got, d.Delay, want.fault, want.delay)
		}
	}
	if left := faults.Faults(); left[1].FailNext != 0 || left[2].FailNext != 0 {
		t.Fatalf("FailNext not counted down: %+v", left)
	}
}

func TestAdd(t *testing.T) {
	var faults Set
	tests := []struct {
		name    string
		fault   Fault
		want    Fault  // the fault as added, if valid
		wantErr string // part of the error, if invalid
	}{
		{"defaults", Fault{FailNext: 1}, Fault{Name: "fault-1", FailNext: 1, Status: 503}, ""},
		{"throttling gets a Retry-After", Fault{Method: "get", Status: 429},
			Fault{Name: "fault-2", Method: "GET", Status: 429, RetryAfter: 1}, ""},
		{"named", Fault{Name: "auth", Status: 401, Always: true}, Fault{Name: "auth", Status: 401, Always: true}, ""},
		{"generated names skip taken ones", Fault{Name: "fault-3"}, Fault{Name: "fault-3", Status: 503}, ""},
		{"next generated name", Fault{}, Fault{Name: "fault-4", Status: 503}, ""},
		{"status 404", Fault{Status: 404}, Fault{}, "status must be 401, 409, 423, 429 or 500-599, got 404"},
		{"status 600", Fault{Status: 600}, Fault{}, "status"},
		{"negative latency", Fault{Latency: -time.Second}, Fault{}, "latency must not be negative"},
		{"negative failNext", Fault{FailNext: -1}, Fault{}, "failNext must not be negative"},
		{"negative retryAfter", Fault{RetryAfter: -1}, Fault{}, "retryAfter must not be negative"},
		{"error rate above 1", Fault{ErrorRate: 1.5}, Fault{}, "errorRate must be between 0 and 1"},
		{"negative error rate", Fault{ErrorRate: -0.1}, Fault{}, "errorRate"},
		{"relative path prefix", Fault{PathPrefix: "v1"}, Fault{}, `pathPrefix "v1" must start with /`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := faults.Add(tt.fault)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if n := len(faults.Faults()); n != 5 {
		t.Fatalf("%d faults added, want the 5 valid ones", n)
	}

	// A fault with an existing name replaces it in place.
	mustAdd(t, &faults, Fault{Name: "auth", Status: 500, FailNext: 2})
	if list := faults.Faults(); len(list) != 5 || list[2].Name != "auth" || list[2].Status != 500 {
		t.Fatalf("replace: %+v", list)
	}
	if !faults.Remove("auth") || faults.Remove("auth") {
		t.Fatal("Remove does not report whether the fault existed")
	}
	faults.Reset(1)
	if mustAdd(t, &faults, Fault{}).Name != "fault-1" || faults.Hits() != 0 {
		t.Fatal("Reset did not restart the name numbering")
	}
}

// TestAbandonedWrite: a client that gives up during the delay leaves the
// API unchanged.
func TestAbandonedWrite(t *testing.T) {
	var faults Set
	st := newStore()
	srv := httptest.NewServer(st.handler(&faults))
	defer srv.Close()
	mustAdd(t, &faults, Fault{Latency: 300 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/items/late", bytes.NewReader([]byte("{}")))
	if res, err := srv.Client().Do(req); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			res.Body.Close()
		}
		t.Fatalf("request ended with %v, want the client's timeout", err)
	}
	time.Sleep(500 * time.Millisecond)
	if st.has("late") {
		t.Fatal("the abandoned write took effect")
	}
}
