// Package faultinject makes a fake cloud API slow or failing on demand, so
// that tests can reproduce a real API's failure modes (latency, timeouts,
// transient 5xx, throttling with Retry-After, a revoked token, a write that
// succeeded but whose response was lost) deterministically. It knows
// nothing of any API's routes or error format: faults select requests by
// method, path and route pattern, and the API supplies a function that
// writes its own error body.
package faultinject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault makes matching requests slow or failing. A request matches when
// every selector that is set (Method, PathPrefix, Route, Query) matches it; a
// fault without selectors matches every request.
type Fault struct {
	// Name identifies the fault: adding a fault with an existing name
	// replaces it. Generated ("fault-1", ...) when empty.
	Name string

	// Method is an HTTP method such as "DELETE"; Add upper-cases it.
	Method string
	// PathPrefix matches a path equal to it or below it: "/v1/servers"
	// matches "/v1/servers" and "/v1/servers/1", not "/v1/servers2".
	PathPrefix string
	// Route is an exact net/http ServeMux pattern such as
	// "GET /v1/servers/{id}", compared with Request.Pattern. The mux sets
	// that only on the request it hands to the routed handler, so Route
	// selects requests only where Handler wraps routed handlers.
	Route string
	// Query matches a request whose query has every parameter of this
	// URL-encoded query with the same value: "page=2" selects the second
	// page of a listing, wherever the listing's faults are to strike.
	Query string

	// Latency delays every matching request; with a client timeout shorter
	// than it, this is how a timeout is simulated.
	Latency time.Duration
	// FailNext fails the next N matching requests; it counts down.
	FailNext int
	// Always fails every matching request until the fault is removed.
	Always bool
	// ErrorRate fails each matching request with this probability (0..1),
	// drawn from the Set's seeded RNG so that a run is repeatable.
	ErrorRate float64
	// Status of the injected failure: 401, 409 (conflict), 423 (locked),
	// 429 or 500-599; 503 when 0.
	Status int
	// RetryAfter, in seconds, is sent as Retry-After on a failure when
	// positive; 429 failures get 1 when it is 0.
	RetryAfter int
	// AfterCommit serves a failing request for real and then replaces its
	// response with the failure: the change takes effect but the client
	// sees an error, as when a response is lost on the way back.
	AfterCommit bool
}

// matches reports whether every selector of f that is set matches r.
func (f *Fault) matches(r *http.Request) bool {
	return (f.Method == "" || f.Method == r.Method) &&
		(f.PathPrefix == "" || underPath(r.URL.Path, f.PathPrefix)) &&
		(f.Route == "" || f.Route == r.Pattern) &&
		(f.Query == "" || queryHas(r.URL.Query(), f.Query))
}

// queryHas reports whether have holds every parameter of want with the
// same values; want was checked by Add.
func queryHas(have url.Values, want string) bool {
	w, _ := url.ParseQuery(want)
	for k, vs := range w {
		for _, v := range vs {
			if !slices.Contains(have[k], v) {
				return false
			}
		}
	}
	return true
}

func underPath(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '/' || strings.HasSuffix(prefix, "/"))
}

// normalize validates f and applies the defaults Add documents.
func (f Fault) normalize() (Fault, error) {
	f.Method = strings.ToUpper(f.Method)
	switch {
	case f.Latency < 0:
		return f, errors.New("latency must not be negative")
	case f.FailNext < 0:
		return f, errors.New("failNext must not be negative")
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1): // also rejects NaN
		return f, fmt.Errorf("errorRate must be between 0 and 1, got %v", f.ErrorRate)
	case f.RetryAfter < 0:
		return f, errors.New("retryAfter must not be negative")
	case f.PathPrefix != "" && !strings.HasPrefix(f.PathPrefix, "/"):
		return f, fmt.Errorf("pathPrefix %q must start with /", f.PathPrefix)
	}
	if _, err := url.ParseQuery(f.Query); err != nil {
		return f, fmt.Errorf("query %q: %w", f.Query, err)
	}
	if f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	if f.Status != 401 && f.Status != 409 && f.Status != 423 && f.Status != 429 && (f.Status < 500 || f.Status > 599) {
		return f, fmt.Errorf("status must be 401, 409, 423, 429 or 500-599, got %d", f.Status)
	}
	if f.Status == 429 && f.RetryAfter == 0 {
		f.RetryAfter = 1
	}
	return f, nil
}

// Set holds the active faults of one fake API, in the order they were
// added. Its zero value is empty, seeded with 0 and ready to use; it is
// safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	faults  []Fault
	hits    int
	seqName int
	rng     *rand.Rand
}

// Add validates f, applies defaults (Name, Status, RetryAfter; see Fault)
// and adds it, replacing in place a fault of the same name. New faults are
// evaluated after existing ones. It returns the fault as added.
func (s *Set) Add(f Fault) (Fault, error) {
	f, err := f.normalize()
	if err != nil {
		return Fault{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for f.Name == "" {
		s.seqName++
		if name := "fault-" + strconv.Itoa(s.seqName); s.index(name) < 0 {
			f.Name = name
		}
	}
	if i := s.index(f.Name); i >= 0 {
		s.faults[i] = f
	} else {
		s.faults = append(s.faults, f)
	}
	return f, nil
}

func (s *Set) index(name string) int {
	return slices.IndexFunc(s.faults, func(f Fault) bool { return f.Name == name })
}

// Faults returns the active faults in evaluation order; FailNext shows
// what is left.
func (s *Set) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.faults)
}

// Remove removes the named fault and reports whether it existed.
func (s *Set) Remove(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.faults)
	s.faults = slices.DeleteFunc(s.faults, func(f Fault) bool { return f.Name == name })
	return len(s.faults) != n
}

// Clear removes every fault.
func (s *Set) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Reset returns s to its starting state with the RNG behind ErrorRate
// seeded with seed: no faults, name numbering and Hits back at 0. Runs
// that start from the same seed and send the same requests inject the
// same failures.
func (s *Set) Reset(seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.hits, s.seqName = nil, 0, 0
	s.rng = newRNG(seed)
}

func newRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Hits counts the requests that faults failed or delayed so far.
func (s *Set) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// Decision is what the faults of a Set decided for one request.
type Decision struct {
	// Delay is the summed Latency of every matching fault.
	Delay time.Duration
	// Fault is a copy of the fault that fails the request, nil if none.
	Fault *Fault
}

// Decide decides, at the arrival of r, its delay and the fault that fails
// it, if any: the first matching fault that fires (Always, else FailNext
// left, which it consumes, else an ErrorRate draw). Later faults are not
// consumed. An API that adds behavior of its own around the faults (a
// global rate limit, say) calls Decide, Hold and Serve itself; others use
// Handler.
func (s *Set) Decide(r *http.Request) Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d Decision
	for i := range s.faults {
		f := &s.faults[i]
		if !f.matches(r) {
			continue
		}
		d.Delay += f.Latency
		if d.Fault != nil {
			continue
		}
		switch {
		case f.Always:
		case f.FailNext > 0:
			f.FailNext--
		case f.ErrorRate > 0:
			if s.rng == nil {
				s.rng = newRNG(0)
			}
			if s.rng.Float64() >= f.ErrorRate {
				continue
			}
		default:
			continue
		}
		copied := *f
		d.Fault = &copied
	}
	if d.Fault != nil || d.Delay > 0 {
		s.hits++
	}
	return d
}

// ErrorWriter writes an API error response in the API's own format.
type ErrorWriter func(w http.ResponseWriter, status int, msg string)

// maxHeldBody bounds the request body Hold reads; fake API requests are
// a few kilobytes at most.
const maxHeldBody = 1 << 20

// Hold delays r by d and reports whether its client is still there to be
// served. It reads the request body first, because the server notices a
// client that gave up only once the body is consumed: an abandoned write
// must not take effect after the delay. A body it cannot read is answered
// with 400.
func Hold(w http.ResponseWriter, r *http.Request, d time.Duration, writeError ErrorWriter) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHeldBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return sleep(r.Context(), d)
}

// Serve answers r as decided, once its delay is over: next serves it when
// no fault fails it; otherwise writeError writes the failure, after next
// has served it into a discarded response if the fault is AfterCommit.
func (d Decision) Serve(w http.ResponseWriter, r *http.Request, next http.Handler, writeError ErrorWriter) {
	if d.Fault == nil {
		next.ServeHTTP(w, r)
		return
	}
	if d.Fault.AfterCommit {
		next.ServeHTTP(&discardedResponse{header: http.Header{}}, r)
	}
	if d.Fault.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(d.Fault.RetryAfter))
	}
	writeError(w, d.Fault.Status, "injected fault "+strconv.Quote(d.Fault.Name))
}

// Handler applies the faults of s to every request before next serves it.
// A request whose client gives up during the delay is not served, so an
// abandoned write never takes effect late.
func (s *Set) Handler(next http.Handler, writeError ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := s.Decide(r)
		if Hold(w, r, d.Delay, writeError) {
			d.Serve(w, r, next, writeError)
		}
	})
}

// discardedResponse takes the real response of an AfterCommit failure,
// which the client never sees.
type discardedResponse struct{ header http.Header }

func (w *discardedResponse) Header() http.Header         { return w.header }
func (w *discardedResponse) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardedResponse) WriteHeader(int)             {}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
