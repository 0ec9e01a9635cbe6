package dofake

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/digitalocean/godo"
)

// apiError is an error answer in the API's format and with its ids.
type apiError struct {
	status  int
	id      string
	message string
}

func (e *apiError) Error() string { return e.id + ": " + e.message }

func notFound() *apiError {
	return &apiError{404, "not_found", "The resource you were accessing could not be found."}
}

func unprocessable(msg string) *apiError { return &apiError{422, "unprocessable_entity", msg} }

func badRequest(msg string) *apiError { return &apiError{400, "bad_request", msg} }

// ids maps a status to the API's error id, for injected faults.
var ids = map[int]string{
	401: "unauthorized", 403: "forbidden", 409: "conflict", 429: "too_many_requests", 500: "server_error",
	502: "server_error", 503: "service_unavailable", 504: "server_error",
}

func writeError(w http.ResponseWriter, status int, msg string) {
	id := ids[status]
	if id == "" {
		id = "server_error"
	}
	writeAPIError(w, &apiError{status, id, msg})
}

// errorBody is the API's error answer; godo.ErrorResponse decodes it.
type errorBody struct {
	ID        string `json:"id"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorBody{ID: e.id, Message: e.message, RequestID: w.Header().Get("X-Request-Id")})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = 500, []byte(`{"id":"server_error","message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Handler returns the handler serving the API under /v2, with faults
// applied before authentication as a proxy in front of the API would.
func (c *Cloud) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]func(*http.Request) (int, any, *apiError){
		"GET /v2/droplets":                 c.listDroplets,
		"GET /v2/droplets/{id}":            c.getDroplet,
		"GET /v2/regions":                  c.listRegions,
		"GET /v2/load_balancers":           c.listLoadBalancers,
		"POST /v2/load_balancers":          c.createLoadBalancer,
		"GET /v2/load_balancers/{id}":      c.getLoadBalancer,
		"PUT /v2/load_balancers/{id}":      c.updateLoadBalancer,
		"DELETE /v2/load_balancers/{id}":   c.deleteLoadBalancer,
		"POST /v2/tags":                    c.createTag,
		"GET /v2/tags/{name}":              c.getTag,
		"POST /v2/tags/{name}/resources":   c.tagResources,
		"DELETE /v2/tags/{name}/resources": c.untagResources,
	}
	for pattern, h := range routes {
		mux.Handle(pattern, c.api(pattern, h))
	}
	mux.Handle("/v2/", c.api("/v2/", func(*http.Request) (int, any, *apiError) { return 0, nil, notFound() }))
	return c.Faults.Handler(mux, writeError)
}

// api wraps a route: counting, the rate limit (headers on every answer,
// and 429 when it is enforced and spent), authentication, body limit, and
// writing the result or the error.
func (c *Cloud) api(pattern string, h func(*http.Request) (int, any, *apiError)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests[pattern]++
		ok, remaining, full := c.spend(c.opts.Now())
		refuse := !ok && c.opts.EnforceRateLimit
		if refuse {
			c.throttled++
		}
		c.served++
		w.Header().Set("X-Request-Id", "req-"+strconv.Itoa(c.served))
		c.mu.Unlock()
		reset := full.Unix()
		if full.After(time.Unix(reset, 0)) {
			reset++ // the bucket is full within that second, not before it
		}
		w.Header().Set("Ratelimit-Limit", strconv.Itoa(c.opts.RateLimit))
		w.Header().Set("Ratelimit-Remaining", strconv.Itoa(remaining))
		w.Header().Set("Ratelimit-Reset", strconv.FormatInt(reset, 10))
		if refuse {
			writeAPIError(w, &apiError{429, "too_many_requests", "API Rate limit exceeded."})
			return
		}
		if !c.authorized(r) {
			writeAPIError(w, &apiError{401, "unauthorized", "Unable to authenticate you"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		status, body, err := h(r)
		switch {
		case err != nil:
			writeAPIError(w, err)
		case body == nil:
			w.WriteHeader(status)
		default:
			writeJSON(w, status, body)
		}
	})
}

// spend takes a token from the bucket at now. It reports whether one was
// left, how many remain, and when the bucket is full again.
func (c *Cloud) spend(now time.Time) (ok bool, remaining int, full time.Time) {
	interval := time.Hour / time.Duration(c.opts.RateLimit)
	if c.full.Before(now) {
		c.full = now
	}
	remaining = c.opts.RateLimit - int((c.full.Sub(now)+interval-1)/interval)
	if remaining <= 0 {
		return false, 0, c.full
	}
	c.full = c.full.Add(interval)
	return true, remaining - 1, c.full
}

func (c *Cloud) authorized(r *http.Request) bool {
	if c.opts.Token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(c.opts.Token)) == 1
}

func decodeBody(r *http.Request, v any) *apiError {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return badRequest("invalid JSON body: " + err.Error())
	}
	return nil
}

// listing is a list answer: the objects under their key, links.pages and
// meta.total, as the API pages them.
type listing map[string]any

// page cuts list to the page the request asks for, as the API does: page
// from 1, per_page 20 by default and at most 200; links.pages holds the
// absolute URLs of the first, previous, next and last pages where they
// exist.
func page[T any](r *http.Request, key string, list []T) (listing, *apiError) {
	q := r.URL.Query()
	num, per := 1, 20
	for name, v := range map[string]*int{"page": &num, "per_page": &per} {
		if s := q.Get(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return nil, badRequest(name + " must be a positive integer")
			}
			*v = n
		}
	}
	per = min(per, 200)
	last := max(1, (len(list)+per-1)/per)
	link := func(n int) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(n))
		q.Set("per_page", strconv.Itoa(per))
		u.RawQuery = q.Encode()
		return u.String()
	}
	pages := &godo.Pages{}
	if num > 1 {
		pages.First, pages.Prev = link(1), link(min(num-1, last))
	}
	if num < last {
		pages.Next, pages.Last = link(num+1), link(last)
	}
	start := min((num-1)*per, len(list))
	items := list[start:min(start+per, len(list))]
	if items == nil {
		items = []T{}
	}
	return listing{key: items, "links": godo.Links{Pages: pages}, "meta": godo.Meta{Total: len(list)}}, nil
}
