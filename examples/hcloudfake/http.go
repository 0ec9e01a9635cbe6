package hcloudfake

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// apiError is an error answer in the API's format and with its codes.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func notFound(what string) *apiError { return &apiError{404, "not_found", what + " not found"} }

func invalidInput(field, msg string) *apiError { return &apiError{400, "invalid_input", msg} }

// limitExceeded is the API's answer to a request that would take a
// resource past a limit of its type.
func limitExceeded(msg string) *apiError { return &apiError{403, "resource_limit_exceeded", msg} }

// codes maps a status to the API's error code, for injected faults.
var codes = map[int]string{
	401: "unauthorized", 409: "conflict", 423: "locked", 429: "rate_limit_exceeded", 500: "server_error",
	502: "server_error", 503: "service_error", 504: "timeout",
}

func writeError(w http.ResponseWriter, status int, msg string) {
	code := codes[status]
	if code == "" {
		code = "server_error"
	}
	writeAPIError(w, &apiError{status, code, msg})
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, schema.ErrorResponse{Error: schema.Error{Code: e.code, Message: e.message,
		DetailsRaw: json.RawMessage("{}")}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = 500, []byte(`{"error":{"code":"server_error","message":"encoding the response failed","details":{}}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Handler returns the handler serving the API under /v1, with faults
// applied before authentication as a proxy in front of the API would.
func (c *Cloud) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]func(*http.Request) (int, any, *apiError){
		"GET /v1/servers":                               c.listServers,
		"POST /v1/servers":                              c.createServer,
		"GET /v1/servers/{id}":                          c.getServer,
		"DELETE /v1/servers/{id}":                       c.deleteServer,
		"GET /v1/load_balancers":                        c.listLoadBalancers,
		"POST /v1/load_balancers":                       c.createLoadBalancer,
		"GET /v1/load_balancers/{id}":                   c.getLoadBalancer,
		"PUT /v1/load_balancers/{id}":                   c.updateLoadBalancer,
		"DELETE /v1/load_balancers/{id}":                c.deleteLoadBalancer,
		"POST /v1/load_balancers/{id}/actions/{action}": c.loadBalancerAction,
		"GET /v1/networks":                              c.listNetworks,
		"POST /v1/networks":                             c.createNetwork,
		"GET /v1/networks/{id}":                         c.getNetwork,
		"POST /v1/networks/{id}/actions/{action}":       c.networkAction,
		"GET /v1/actions":                               c.listActions,
		"GET /v1/actions/{id}":                          c.getAction,
		"GET /v1/load_balancers/actions/{id}":           c.getAction,
		"GET /v1/networks/actions/{id}":                 c.getAction,
		"GET /v1/locations":                             listOf("locations", Locations, func(l *schema.Location) string { return l.Name }),
		"GET /v1/server_types":                          listOf("server_types", ServerTypes, func(t *schema.ServerType) string { return t.Name }),
		"GET /v1/load_balancer_types":                   listOf("load_balancer_types", LoadBalancerTypes, func(t *schema.LoadBalancerType) string { return t.Name }),
		"GET /v1/load_balancer_types/{id}":              c.getLoadBalancerType,
	}
	for pattern, h := range routes {
		mux.Handle(pattern, c.api(pattern, h))
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, &apiError{404, "not_found", "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return c.Faults.Handler(mux, writeError)
}

// api wraps a route: counting, the rate limit (headers, and 429 when it
// is enforced and spent), authentication, body limit, and writing the
// result or the error.
func (c *Cloud) api(pattern string, h func(*http.Request) (int, any, *apiError)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests[pattern]++
		ok, remaining, full := c.spend(c.opts.Now())
		refuse := !ok && c.opts.EnforceRateLimit
		if refuse {
			c.throttled++
		}
		c.mu.Unlock()
		reset := full.Unix()
		if full.After(time.Unix(reset, 0)) {
			reset++ // the bucket is full within that second, not before it
		}
		w.Header().Set("RateLimit-Limit", strconv.Itoa(c.opts.RateLimit))
		w.Header().Set("RateLimit-Remaining", strconv.Itoa(remaining))
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
		if refuse {
			writeAPIError(w, &apiError{429, "rate_limit_exceeded", "limit of " + strconv.Itoa(c.opts.RateLimit) + " requests per hour reached"})
			return
		}
		if !c.authorized(r) {
			writeAPIError(w, &apiError{401, "unauthorized", "unable to authenticate"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		status, body, err := h(r)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
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
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return &apiError{400, "json_error", "invalid JSON body: " + err.Error()}
	}
	return nil
}

func pathID(r *http.Request) (int64, *apiError) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, invalidInput("id", "invalid ID "+strconv.Quote(r.PathValue("id")))
	}
	return id, nil
}

// page cuts list to the page the request asks for, as the API does:
// page from 1, per_page 25 by default and at most 50.
func page[T any](r *http.Request, list []T) ([]T, schema.Meta, *apiError) {
	q := r.URL.Query()
	num, per := 1, 25
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, schema.Meta{}, invalidInput("page", "page must be a positive integer")
		}
		num = n
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, schema.Meta{}, invalidInput("per_page", "per_page must be a positive integer")
		}
		per = min(n, 50)
	}
	last := max(1, (len(list)+per-1)/per)
	p := &schema.MetaPagination{Page: num, PerPage: per, LastPage: last, TotalEntries: len(list)}
	if num > 1 {
		p.PreviousPage = num - 1
	}
	if num < last {
		p.NextPage = num + 1
	}
	start := min((num-1)*per, len(list))
	return list[start:min(start+per, len(list))], schema.Meta{Pagination: p}, nil
}

// matchLabels evaluates a label selector as the API does: comma-separated
// requirements "k=v", "k==v", "k!=v", "k", "!k", "k in (a,b)" and
// "k notin (a,b)".
func matchLabels(selector string, labels map[string]string) (bool, *apiError) {
	for _, req := range splitSelector(selector) {
		req = strings.TrimSpace(req)
		if req == "" {
			continue
		}
		var ok bool
		switch {
		case strings.HasPrefix(req, "!"):
			_, has := labels[strings.TrimSpace(req[1:])]
			ok = !has
		case strings.Contains(req, "!="):
			k, v, _ := strings.Cut(req, "!=")
			ok = labels[strings.TrimSpace(k)] != strings.TrimSpace(v)
		case strings.Contains(req, "="):
			k, v, _ := strings.Cut(req, "=")
			got, has := labels[strings.TrimSpace(k)]
			ok = has && got == strings.TrimSpace(strings.TrimPrefix(v, "="))
		case strings.Contains(req, " notin ") || strings.Contains(req, " in "):
			neg := strings.Contains(req, " notin ")
			k, set, _ := strings.Cut(req, map[bool]string{true: " notin ", false: " in "}[neg])
			set = strings.TrimSpace(set)
			if !strings.HasPrefix(set, "(") || !strings.HasSuffix(set, ")") {
				return false, invalidInput("label_selector", "invalid label selector "+strconv.Quote(selector))
			}
			got, has := labels[strings.TrimSpace(k)]
			in := has && slices.ContainsFunc(strings.Split(set[1:len(set)-1], ","), func(v string) bool { return strings.TrimSpace(v) == got })
			ok = in != neg
		default:
			_, ok = labels[req]
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// splitSelector splits at commas outside parentheses.
func splitSelector(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// filter keeps the items matching the request's name and label_selector.
// It works on the cloud's own objects, so that only what is answered gets
// copied.
func filter[T any](r *http.Request, items []*T, name func(*T) string, labels func(*T) map[string]string) ([]*T, *apiError) {
	q := r.URL.Query()
	var out []*T
	for _, item := range items {
		if n := q.Get("name"); n != "" && name(item) != n {
			continue
		}
		if sel := q.Get("label_selector"); sel != "" && labels != nil {
			ok, err := matchLabels(sel, labels(item))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, item)
	}
	return out, nil
}

// listPage filters items, cuts the requested page and copies it.
func listPage[T any](r *http.Request, items []*T, name func(*T) string, labels func(*T) map[string]string) ([]T, schema.Meta, *apiError) {
	list, err := filter(r, items, name, labels)
	if err != nil {
		return nil, schema.Meta{}, err
	}
	list, meta, err := page(r, list)
	if err != nil {
		return nil, schema.Meta{}, err
	}
	out := make([]T, len(list))
	for i, item := range list {
		out[i] = clone(item)
	}
	return out, meta, nil
}

// listOf serves a static catalogue list with name filter and pagination.
func listOf[T any](key string, items []T, name func(*T) string) func(*http.Request) (int, any, *apiError) {
	ptrs := make([]*T, len(items))
	for i := range items {
		ptrs[i] = &items[i]
	}
	return func(r *http.Request) (int, any, *apiError) {
		list, meta, err := listPage(r, ptrs, name, nil)
		if err != nil {
			return 0, nil, err
		}
		return 200, map[string]any{key: list, "meta": meta}, nil
	}
}

func (c *Cloud) getLoadBalancerType(r *http.Request) (int, any, *apiError) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	t, ok := loadBalancerType(schema.IDOrName{ID: id})
	if !ok {
		return 0, nil, notFound("load balancer type")
	}
	return 200, schema.LoadBalancerTypeGetResponse{LoadBalancerType: t}, nil
}

// clone deep-copies a schema value through JSON, so that callers never
// share state with the cloud.
func clone[T any](v *T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic("hcloudfake: cloning: " + err.Error())
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic("hcloudfake: cloning: " + err.Error())
	}
	return out
}

// sorted returns the objects of m ordered by ID, as the API lists them.
func sorted[T any](m map[int64]*T) []*T {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*T, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// sortedClones is sorted, copied.
func sortedClones[T any](m map[int64]*T) []T {
	list := sorted(m)
	out := make([]T, len(list))
	for i, v := range list {
		out[i] = clone(v)
	}
	return out
}
