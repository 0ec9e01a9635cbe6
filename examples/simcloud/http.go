package simcloud

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// apiPatterns lists every /v1 route pattern. They are the keys of
// Counters.Requests and the valid values of Fault.Route.
var apiPatterns = []string{
	"GET /v1/instances",
	"GET /v1/instances/{id}",
	"GET /v1/zones",
	"GET /v1/loadbalancers",
	"POST /v1/loadbalancers",
	"GET /v1/loadbalancers/{name}",
	"PUT /v1/loadbalancers/{name}",
	"DELETE /v1/loadbalancers/{name}",
	"GET /v1/routes",
	"POST /v1/routes",
	"GET /v1/routes/{name}",
	"DELETE /v1/routes/{name}",
}

// Endpoints returns the /v1 route patterns, the valid values of
// Fault.Route (the "endpoint" selector of the admin API).
func Endpoints() []string { return append([]string{}, apiPatterns...) }

// maxBody bounds request bodies; real requests are a few hundred bytes.
const maxBody = 1 << 20

// Handler returns the HTTP handler serving /v1, /admin and /healthz. It can
// be mounted in any server, e.g. httptest.NewServer(cloud.Handler()).
func (c *Cloud) Handler() http.Handler { return c.handler }

func (c *Cloud) newHandler() http.Handler {
	mux := http.NewServeMux()
	api := map[string]http.HandlerFunc{
		"GET /v1/instances":               c.listInstances,
		"GET /v1/instances/{id}":          c.getInstance,
		"GET /v1/zones":                   c.listZones,
		"GET /v1/loadbalancers":           c.listLoadBalancers,
		"POST /v1/loadbalancers":          c.createLoadBalancer,
		"GET /v1/loadbalancers/{name}":    c.getLoadBalancer,
		"PUT /v1/loadbalancers/{name}":    c.updateLoadBalancer,
		"DELETE /v1/loadbalancers/{name}": c.deleteLoadBalancer,
		"GET /v1/routes":                  c.listRoutes,
		"POST /v1/routes":                 c.createRoute,
		"GET /v1/routes/{name}":           c.getRoute,
		"DELETE /v1/routes/{name}":        c.deleteRoute,
	}
	if len(api) != len(apiPatterns) {
		panic("simcloud: apiPatterns out of sync with handlers")
	}
	for _, p := range apiPatterns {
		mux.Handle(p, c.apiHandler(p, api[p]))
	}
	mux.Handle("/v1/", c.apiHandler("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	}))

	admin := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, c.adminHandler(h))
	}
	admin("GET /admin/state", c.adminState)
	admin("GET /admin/instances", c.adminListInstances)
	admin("POST /admin/instances", c.adminAddInstance)
	admin("PUT /admin/instances/{id}", c.adminUpdateInstance)
	admin("DELETE /admin/instances/{id}", c.adminDeleteInstance)
	admin("POST /admin/instances/{id}/start", c.adminSetState(StateRunning))
	admin("POST /admin/instances/{id}/stop", c.adminSetState(StateStopped))
	admin("GET /admin/faults", c.adminListFaults)
	admin("POST /admin/faults", c.adminSetFault)
	admin("DELETE /admin/faults", c.adminClearFaults)
	admin("DELETE /admin/faults/{name}", c.adminClearFault)
	admin("GET /admin/global", c.adminGetGlobal)
	admin("PUT /admin/global", c.adminSetGlobal)
	admin("GET /admin/counters", c.adminGetCounters)
	admin("DELETE /admin/counters", c.adminResetCounters)
	admin("POST /admin/reset", c.adminReset)
	admin("/admin/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})

	if c.opts.Logger != nil {
		return logRequests(c.opts.Logger, mux)
	}
	return mux
}

// apiHandler wraps a /v1 handler with auth, global latency and rate limit,
// fault injection and counting.
func (c *Cloud) apiHandler(pattern string, h http.HandlerFunc) http.Handler {
	// Count when the status is written, before the client can see the
	// response, so a test reading counters right after a call sees it.
	count := func(status int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.counters.Requests[pattern]++
		if status == 0 {
			return
		}
		c.counters.Statuses[status]++
		m := c.counters.EndpointStatuses[pattern]
		if m == nil {
			m = map[int]int{}
			c.counters.EndpointStatuses[pattern] = m
		}
		m[status]++
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, onStatus: count}
		c.serveAPI(sw, r, h)
		if sw.status == 0 { // the client went away during a delay
			count(0)
		}
	})
}

func (c *Cloud) serveAPI(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	if !authorized(r, c.opts.Token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="simcloud"`)
		writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
		return
	}

	// Decide everything at arrival time, then wait without holding the
	// lock. A rate-limited request consumes no fault.
	c.mu.Lock()
	allowed, wait := c.bucket.take(time.Now())
	var faults faultinject.Decision
	if !allowed {
		c.counters.RateLimited++
	} else if faults = c.faults.Decide(r); faults.Fault != nil {
		c.counters.FaultsInjected++
	}
	delay := c.global.Latency + faults.Delay
	c.mu.Unlock()

	if !faultinject.Hold(w, r, delay, writeError) {
		return
	}
	if !allowed {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return
	}
	faults.Serve(w, r, h, writeError)
}

func (c *Cloud) adminHandler(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, c.opts.AdminToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="simcloud-admin"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid admin bearer token")
			return
		}
		h(w, r)
	})
}

func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(token)) == 1
}

// ---- /v1 handlers ----

func (c *Cloud) listInstances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, id := q.Get("name"), ""
	if pid := q.Get("providerID"); pid != "" {
		var ok bool
		if id, ok = strings.CutPrefix(pid, ProviderIDPrefix); !ok || id == "" {
			writeJSON(w, http.StatusOK, []Instance{})
			return
		}
	}
	c.mu.Lock()
	out := c.instancesLocked(name, id)
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (c *Cloud) getInstance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, ok := c.Instance(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("instance %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, in)
}

func (c *Cloud) listZones(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Zones())
}

func (c *Cloud) listLoadBalancers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.LoadBalancers())
}

func (c *Cloud) getLoadBalancer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	lb, ok := c.LoadBalancer(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("load balancer %q not found", name))
		return
	}
	writeJSON(w, http.StatusOK, lb)
}

func (c *Cloud) createLoadBalancer(w http.ResponseWriter, r *http.Request) {
	var in LoadBalancer
	if err := decodeBody(w, r, &in); err != nil {
		writeErr(w, err)
		return
	}
	c.mu.Lock()
	lb, err := c.createLoadBalancerLocked(in)
	if err == nil {
		c.counters.LoadBalancersCreated++
	}
	c.mu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, lb)
}

func (c *Cloud) updateLoadBalancer(w http.ResponseWriter, r *http.Request) {
	var in LoadBalancer
	if err := decodeBody(w, r, &in); err != nil {
		writeErr(w, err)
		return
	}
	c.mu.Lock()
	lb, err := c.updateLoadBalancerLocked(r.PathValue("name"), in)
	if err == nil {
		c.counters.LoadBalancersUpdated++
	}
	c.mu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, lb)
}

func (c *Cloud) deleteLoadBalancer(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	err := c.deleteLoadBalancerLocked(r.PathValue("name"))
	if err == nil {
		c.counters.LoadBalancersDeleted++
	}
	c.mu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) listRoutes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Routes())
}

func (c *Cloud) getRoute(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rt, ok := c.Route(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("route %q not found", name))
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

func (c *Cloud) createRoute(w http.ResponseWriter, r *http.Request) {
	var in Route
	if err := decodeBody(w, r, &in); err != nil {
		writeErr(w, err)
		return
	}
	c.mu.Lock()
	rt, err := c.createRouteLocked(in)
	if err == nil {
		c.counters.RoutesCreated++
	}
	c.mu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, rt)
}

func (c *Cloud) deleteRoute(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	err := c.deleteRouteLocked(r.PathValue("name"))
	if err == nil {
		c.counters.RoutesDeleted++
	}
	c.mu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ---- helpers ----

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeErr maps Go API errors to HTTP statuses.
func writeErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, ErrExhausted):
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, err.Error())
}

// decodeBody decodes a JSON request body strictly: unknown fields are
// rejected so that a misspelt field in a client is caught, not ignored.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return errorf(ErrInvalid, "reading body: %v", err)
	}
	if err := strictUnmarshal(body, v); err != nil {
		return errorf(ErrInvalid, "invalid JSON body: %v", err)
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// statusWriter records the response status, calling onStatus (if set)
// once, just before the status goes out.
type statusWriter struct {
	http.ResponseWriter
	status   int
	onStatus func(int)
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.onStatus != nil {
			w.onStatus(code)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.RequestURI()),
			slog.Int("status", sw.status),
			slog.Duration("duration", time.Since(start)))
	})
}
