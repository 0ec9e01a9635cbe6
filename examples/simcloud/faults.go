package simcloud

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// Fault makes matching /v1 requests slow or failing. It is a
// faultinject.Fault, the mechanism the project's fake APIs share, with
// simcloud's admin API wire format and checks: Route must be one of
// Endpoints() (the JSON field "endpoint"), PathPrefix "/v1/" followed by
// a resource, "instances", "loadbalancers", "routes" or "zones" (the JSON
// field "resource"), and Method GET, POST, PUT or DELETE.
//
// Faults exist so that tests can reproduce the failure modes of real cloud
// APIs (slowness, transient 5xx, throttling, and a write that succeeded but
// whose response was lost) deterministically.
type Fault faultinject.Fault

// faultJSON is the admin API's form of a Fault: simcloud's selector names,
// and the latency as a Go duration string.
type faultJSON struct {
	Name        string  `json:"name"`
	Endpoint    string  `json:"endpoint,omitempty"`
	Method      string  `json:"method,omitempty"`
	Resource    string  `json:"resource,omitempty"`
	Latency     string  `json:"latency,omitempty"`
	FailNext    int     `json:"failNext,omitempty"`
	Always      bool    `json:"always,omitempty"`
	ErrorRate   float64 `json:"errorRate,omitempty"`
	Status      int     `json:"status,omitempty"`
	RetryAfter  int     `json:"retryAfter,omitempty"`
	AfterCommit bool    `json:"afterCommit,omitempty"`
}

// MarshalJSON encodes f in the admin API's wire format.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{f.Name, f.Route, f.Method, strings.TrimPrefix(f.PathPrefix, resourcePrefix), "",
		f.FailNext, f.Always, f.ErrorRate, f.Status, f.RetryAfter, f.AfterCommit}
	if f.Latency != 0 {
		j.Latency = f.Latency.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes f from the admin API's wire format.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	d, err := parseDuration(j.Latency)
	if err != nil {
		return err
	}
	*f = Fault{Name: j.Name, Route: j.Endpoint, Method: j.Method, Latency: d,
		FailNext: j.FailNext, Always: j.Always, ErrorRate: j.ErrorRate, Status: j.Status,
		RetryAfter: j.RetryAfter, AfterCommit: j.AfterCommit}
	if j.Resource != "" {
		f.PathPrefix = resourcePrefix + j.Resource
	}
	return nil
}

// Global holds the faults that apply to every /v1 request: a fixed latency
// and a token-bucket rate limit, to make the cloud behave like a real one
// in scale tests.
type Global struct {
	// Latency delays every authenticated /v1 request.
	Latency time.Duration `json:"-"`
	// RateLimit is the sustained requests per second; 0 disables the limit.
	// Requests over the limit get 429 with Retry-After.
	RateLimit float64 `json:"rateLimit"`
	// Burst is the bucket size; 0 means max(1, ceil(RateLimit)).
	Burst int `json:"burst"`
}

type globalJSON struct {
	Latency   string  `json:"latency"`
	RateLimit float64 `json:"rateLimit"`
	Burst     int     `json:"burst"`
}

// MarshalJSON encodes Latency as a Go duration string.
func (g Global) MarshalJSON() ([]byte, error) {
	return json.Marshal(globalJSON{g.Latency.String(), g.RateLimit, g.Burst})
}

// UnmarshalJSON decodes Latency from a Go duration string.
func (g *Global) UnmarshalJSON(b []byte) error {
	var j globalJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	d, err := parseDuration(j.Latency)
	if err != nil {
		return err
	}
	*g = Global{d, j.RateLimit, j.Burst}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("latency: %v", err)
	}
	return d, nil
}

func (g Global) normalize() (Global, error) {
	if g.Latency < 0 {
		return g, errorf(ErrInvalid, "latency must not be negative")
	}
	if g.RateLimit < 0 || math.IsNaN(g.RateLimit) || math.IsInf(g.RateLimit, 0) {
		return g, errorf(ErrInvalid, "rateLimit must be a non-negative number")
	}
	if g.Burst < 0 {
		return g, errorf(ErrInvalid, "burst must not be negative")
	}
	if g.RateLimit == 0 {
		g.Burst = 0
	} else if g.Burst == 0 {
		g.Burst = max(1, int(math.Ceil(g.RateLimit)))
	}
	return g, nil
}

// resourcePrefix is what PathPrefix holds before a resource name.
const resourcePrefix = "/v1/"

var (
	resources = []string{"instances", "loadbalancers", "routes", "zones"}
	methods   = []string{"GET", "POST", "PUT", "DELETE"}
)

// check reports what simcloud rejects beyond faultinject's own checks:
// selectors naming no simcloud route, resource or method, and names
// outside the resource name rules.
func (f Fault) check() error {
	if f.Route != "" && !slices.Contains(apiPatterns, f.Route) {
		return errorf(ErrInvalid, "unknown endpoint %q (want one of %s)", f.Route, strings.Join(apiPatterns, ", "))
	}
	if m := strings.ToUpper(f.Method); m != "" && !slices.Contains(methods, m) {
		return errorf(ErrInvalid, "unknown method %q (want one of %s)", f.Method, strings.Join(methods, ", "))
	}
	if f.PathPrefix != "" {
		resource, ok := strings.CutPrefix(f.PathPrefix, resourcePrefix)
		if !ok || !slices.Contains(resources, resource) {
			return errorf(ErrInvalid, "unknown resource %q (want one of %s)", resource, strings.Join(resources, ", "))
		}
	}
	if f.Name != "" && !validName(f.Name) {
		return errorf(ErrInvalid, "invalid fault name %q", f.Name)
	}
	return nil
}

// tokenBucket is a classic token bucket; rate 0 disables it.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *tokenBucket) reset(g Global, now time.Time) {
	*b = tokenBucket{rate: g.RateLimit, burst: float64(g.Burst), tokens: float64(g.Burst), last: now}
}

// take consumes a token, or reports how long until one is available.
func (b *tokenBucket) take(now time.Time) (bool, time.Duration) {
	if b.rate <= 0 {
		return true, 0
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, as the
// Retry-After header only carries integers.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// Counters is a snapshot of /v1 traffic since the last reset. Changes made
// through the admin API or Go methods are not counted.
type Counters struct {
	// Requests counts requests per route pattern, e.g.
	// "POST /v1/loadbalancers"; requests to unknown /v1 paths count
	// under "/v1/".
	Requests map[string]int `json:"requests"`
	// Statuses counts responses per status code.
	Statuses map[int]int `json:"statuses"`
	// EndpointStatuses counts responses per route pattern and status.
	EndpointStatuses map[string]map[int]int `json:"endpointStatuses"`

	LoadBalancersCreated int `json:"loadBalancersCreated"`
	LoadBalancersUpdated int `json:"loadBalancersUpdated"`
	LoadBalancersDeleted int `json:"loadBalancersDeleted"`
	RoutesCreated        int `json:"routesCreated"`
	RoutesDeleted        int `json:"routesDeleted"`

	// FaultsInjected counts failures produced by faults.
	FaultsInjected int `json:"faultsInjected"`
	// RateLimited counts requests rejected by the global rate limit.
	RateLimited int `json:"rateLimited"`
}

func newCounters() Counters {
	return Counters{
		Requests:         map[string]int{},
		Statuses:         map[int]int{},
		EndpointStatuses: map[string]map[int]int{},
	}
}

func (c Counters) clone() Counters {
	out := c
	out.Requests = maps.Clone(c.Requests)
	out.Statuses = maps.Clone(c.Statuses)
	out.EndpointStatuses = make(map[string]map[int]int, len(c.EndpointStatuses))
	for k, m := range c.EndpointStatuses {
		out.EndpointStatuses[k] = maps.Clone(m)
	}
	return out
}

// Status returns how many responses endpoint (a route pattern) answered
// with status.
func (c Counters) Status(endpoint string, status int) int {
	return c.EndpointStatuses[endpoint][status]
}
