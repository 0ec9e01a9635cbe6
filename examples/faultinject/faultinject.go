// Package faultinject makes a fake cloud API slow or failing on demand, so
// that tests can reproduce a real API's failure modes (latency, timeouts,
// transient 5xx, throttling with Retry-After, a revoked token)
// deterministically. It knows nothing of any API's error format: the API
// supplies a function that writes its own error body.
package faultinject

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault makes matching requests slow or failing. A request matches when
// its method equals Method (if set) and its path starts with PathPrefix
// (if set).
type Fault struct {
	// Name identifies the fault: adding a fault with an existing name
	// replaces it.
	Name       string
	Method     string
	PathPrefix string

	// Latency delays every matching request; with a client timeout shorter
	// than it, this is how a timeout is simulated.
	Latency time.Duration
	// FailNext fails the next N matching requests; it counts down.
	FailNext int
	// Always fails every matching request until the fault is removed.
	Always bool
	// Status of the injected failure: 401, 429 or 500-599; 503 when 0.
	Status int
	// RetryAfter, in seconds, is sent as Retry-After on a failure when
	// positive; 429 failures get 1 when it is 0.
	RetryAfter int
}

// Set holds the active faults of one fake API. Its zero value is empty and
// ready to use; it is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	faults []Fault
	hits   int
}

// Add adds f, replacing a fault of the same name.
func (s *Set) Add(f Fault) error {
	if f.Name == "" {
		return errors.New("faultinject: a fault needs a name")
	}
	if f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	if f.Status != 401 && f.Status != 429 && (f.Status < 500 || f.Status > 599) {
		return errors.New("faultinject: status must be 401, 429 or 500-599, got " + strconv.Itoa(f.Status))
	}
	if f.Latency < 0 || f.FailNext < 0 || f.RetryAfter < 0 {
		return errors.New("faultinject: latency, failNext and retryAfter must not be negative")
	}
	if f.Status == 429 && f.RetryAfter == 0 {
		f.RetryAfter = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		if s.faults[i].Name == f.Name {
			s.faults[i] = f
			return nil
		}
	}
	s.faults = append(s.faults, f)
	return nil
}

// Remove removes the named fault; Clear removes them all.
func (s *Set) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		if s.faults[i].Name == name {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return
		}
	}
}

// Clear removes every fault.
func (s *Set) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Hits counts the requests that faults failed or delayed so far.
func (s *Set) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// pick decides, at arrival, the delay of a request and the fault that
// fails it, if any: the first matching fault with a failure left.
func (s *Set) pick(method, path string) (time.Duration, *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var delay time.Duration
	var inj *Fault
	for i := range s.faults {
		f := &s.faults[i]
		if (f.Method != "" && f.Method != method) || !strings.HasPrefix(path, f.PathPrefix) {
			continue
		}
		delay += f.Latency
		if inj != nil {
			continue
		}
		switch {
		case f.Always:
		case f.FailNext > 0:
			f.FailNext--
		default:
			continue
		}
		copied := *f
		inj = &copied
	}
	if inj != nil || delay > 0 {
		s.hits++
	}
	return delay, inj
}

// ErrorWriter writes an API error response in the API's own format.
type ErrorWriter func(w http.ResponseWriter, status int, msg string)

// Handler applies the faults of s to every request before next serves it.
// A request whose client gives up during the delay is not served, so an
// abandoned write never takes effect late.
func (s *Set) Handler(next http.Handler, writeError ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delay, inj := s.pick(r.Method, r.URL.Path)
		if !sleep(r.Context(), delay) {
			return
		}
		if inj == nil {
			next.ServeHTTP(w, r)
			return
		}
		if inj.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(inj.RetryAfter))
		}
		writeError(w, inj.Status, "injected fault "+strconv.Quote(inj.Name))
	})
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
