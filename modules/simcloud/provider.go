// Package simcloud is the provider for the simulated cloud of
// examples/simcloud: instances, load balancers, routes and zones over its
// HTTP/JSON API.
//
// The same code runs inside the wasm module (modules/simcloud/module) and
// natively with a Host from package sdk/native. Every cloud request goes
// through sdk.Host.HTTP, never net/http, and the package uses only the
// standard library without fmt, so it builds with TinyGo as well as with Go.
//
// The provider config is JSON:
//
//	{
//	  "endpoint": "http://127.0.0.1:8780",   // required: base URL of the cloud API
//	  "tokenCredential": "token",            // credential holding the bearer token; default "token", "" = no auth
//	  "requestTimeout": "10s"                // optional: per-request timeout, at most the host's
//	}
//
// The bearer token is read through Host.Credential on every request, so a
// rotated Secret takes effect on the next call.
package simcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/abi"
)

// ProviderIDPrefix is the scheme of simcloud provider IDs: instance
// "i-0001" is node provider ID "simcloud://i-0001".
const ProviderIDPrefix = "simcloud://"

// DefaultTokenCredential is the credential read for the bearer token when
// the config does not name one.
const DefaultTokenCredential = "token"

// Provider implements sdk.Provider, sdk.InstancesV2, sdk.LoadBalancer,
// sdk.Routes and sdk.Zones against the simcloud API.
//
// The legacy sdk.Instances interface is deliberately not implemented: the
// controllers build legacy provider IDs from the CCM's provider name
// ("wasm"), which would not be simcloud's.
type Provider struct {
	host sdk.Host

	cluster     string
	endpoint    string // without a trailing slash
	credential  string // "" sends no Authorization header
	timeout     time.Duration
	routePrefix string
}

var (
	_ sdk.Provider     = (*Provider)(nil)
	_ sdk.InstancesV2  = (*Provider)(nil)
	_ sdk.LoadBalancer = (*Provider)(nil)
	_ sdk.Routes       = (*Provider)(nil)
	_ sdk.Zones        = (*Provider)(nil)
)

// New returns a provider that reaches the cloud through host. It must be
// initialized with Init before use.
func New(host sdk.Host) *Provider { return &Provider{host: host} }

// config is the provider config. TokenCredential is a pointer so that an
// explicit "" (no auth) differs from an absent field (the default).
type config struct {
	Endpoint        string  `json:"endpoint"`
	TokenCredential *string `json:"tokenCredential"`
	RequestTimeout  string  `json:"requestTimeout"`
}

// Init parses the provider config. It does not contact the cloud, so an
// unreachable cloud at start-up does not make the module unusable.
func (p *Provider) Init(_ context.Context, clusterName string, raw []byte) error {
	var cfg config
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New("simcloud: provider config is empty; it needs at least {\"endpoint\": \"http://host:port\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return errors.New("simcloud: parsing provider config: " + err.Error() +
			` (known fields: "endpoint", "tokenCredential", "requestTimeout")`)
	}
	if dec.More() {
		return errors.New("simcloud: parsing provider config: data after the JSON object")
	}
	endpoint, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return err
	}
	credential := DefaultTokenCredential
	if cfg.TokenCredential != nil {
		credential = *cfg.TokenCredential
	}
	var timeout time.Duration
	if cfg.RequestTimeout != "" {
		timeout, err = time.ParseDuration(cfg.RequestTimeout)
		if err != nil || timeout <= 0 {
			return errors.New("simcloud: provider config: requestTimeout " + strconv.Quote(cfg.RequestTimeout) +
				" is not a positive Go duration such as \"10s\"")
		}
		if timeout < time.Millisecond {
			timeout = time.Millisecond
		}
	}
	p.cluster, p.endpoint, p.credential, p.timeout = clusterName, endpoint, credential, timeout
	p.routePrefix = routePrefix(clusterName)
	if p.host.LogEnabled(abi.LogInfo) {
		p.host.Log(abi.LogInfo, "simcloud: using endpoint "+endpoint+" for cluster "+strconv.Quote(clusterName))
	}
	return nil
}

// parseEndpoint checks the base URL: http or https, a host, no query or
// fragment. A path is allowed (a cloud behind a path prefix) and its
// trailing slash dropped.
func parseEndpoint(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", errors.New("simcloud: provider config: endpoint " + strconv.Quote(s) + " " + why)
	}
	if s == "" {
		return bad("is required (the base URL of the simcloud API, e.g. \"http://127.0.0.1:8780\")")
	}
	rest, ok := strings.CutPrefix(s, "http://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "https://"); !ok {
			return bad("must start with http:// or https://")
		}
	}
	host, _, _ := strings.Cut(rest, "/")
	if host == "" {
		return bad("has no host")
	}
	if strings.ContainsAny(s, "?# \t\r\n") {
		return bad("must not contain a query, fragment or whitespace")
	}
	return strings.TrimRight(s, "/"), nil
}

// ---- HTTP ----

// request performs one API call. It returns the response whatever its
// status; err is set only when no response was received, and then says
// what was being done.
func (p *Provider) request(ctx context.Context, what, method, path string, body []byte) (*abi.HTTPResponse, error) {
	if p.endpoint == "" {
		return nil, errors.New("simcloud: " + what + ": the provider was not initialized")
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.New("simcloud: " + what + ": " + err.Error())
	}
	req := &abi.HTTPRequest{Method: method, URL: p.endpoint + path, Body: body}
	req.Headers = append(make([]abi.Header, 0, 3), abi.Header{Name: "Accept", Value: "application/json"})
	if body != nil {
		req.Headers = append(req.Headers, abi.Header{Name: "Content-Type", Value: "application/json"})
	}
	if p.credential != "" {
		// Read at every call: the host reads the mounted Secret each time,
		// which is how a rotated token takes effect.
		token, err := p.host.Credential(p.credential)
		if err != nil {
			return nil, errors.New("simcloud: " + what + ": reading the API token: " + err.Error())
		}
		token = strings.TrimSpace(token)
		if token == "" {
			return nil, errors.New("simcloud: " + what + ": credential " + strconv.Quote(p.credential) + " is empty")
		}
		req.Headers = append(req.Headers, abi.Header{Name: "Authorization", Value: "Bearer " + token})
	}
	timeout := p.timeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); timeout == 0 || left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	if timeout > 0 {
		req.TimeoutMillis = uint32(min(timeout.Milliseconds(), int64(^uint32(0))))
	}
	debug := p.host.LogEnabled(abi.LogDebug)
	var start time.Time
	if debug {
		start = time.Now()
	}
	resp, err := p.host.HTTP(req)
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error) // hosts report a missing response either way
	}
	if err != nil {
		if debug {
			p.host.Log(abi.LogDebug, "simcloud: "+method+" "+path+" failed after "+time.Since(start).String()+": "+err.Error())
		}
		return nil, errors.New("simcloud: " + what + ": " + method + " " + path + ": no response: " + err.Error())
	}
	if debug {
		p.host.Log(abi.LogDebug, "simcloud: "+method+" "+path+" -> "+strconv.Itoa(int(resp.StatusCode))+" in "+time.Since(start).String())
	}
	return resp, nil
}

// failure turns an unexpected response into an error that says what was
// being done and what the cloud answered. Throttling (429) and server
// errors that carry Retry-After become sdk.RetryAfter errors.
func failure(what, method, path string, resp *abi.HTTPResponse) error {
	msg := "simcloud: " + what + ": " + method + " " + path + ": cloud answered " +
		strconv.Itoa(int(resp.StatusCode)) + ": " + errorMessage(resp)
	if resp.StatusCode == 401 {
		msg += " (check the API token credential)"
	}
	if resp.StatusCode == 429 || resp.StatusCode >= 500 {
		after, ok := retryAfter(resp.Header("Retry-After"))
		if !ok && resp.StatusCode == 429 {
			after, ok = time.Second, true
		}
		if ok {
			return sdk.RetryAfter(after, msg) // the host adds the delay to the message
		}
	}
	return errors.New(msg)
}

// errorMessage extracts the {"error": "..."} message of an error response,
// or a short printable excerpt of a body in another format.
func errorMessage(resp *abi.HTTPResponse) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(resp.Body, &e) == nil && e.Error != "" {
		return e.Error
	}
	body := bytes.TrimSpace(resp.Body)
	if len(body) == 0 {
		return "(empty body)"
	}
	if len(body) > 200 {
		body = body[:200]
	}
	out := make([]byte, 0, len(body)+2)
	for _, c := range body {
		if c < 0x20 || c >= 0x7f {
			c = '?'
		}
		out = append(out, c)
	}
	return "unexpected body " + strconv.Quote(string(out))
}

// maxRetryAfter bounds a server-requested delay.
const maxRetryAfter = time.Hour

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 GMT", v); err == nil {
		d = time.Until(t)
	} else {
		return 0, false
	}
	return min(max(d, time.Second), maxRetryAfter), true
}

// gone reports whether resp is a definitive "does not exist" from the API:
// a 404 carrying simcloud's JSON error body. A 404 from anything else (a
// proxy, a wrong endpoint path, an unknown API route) is not proof that a
// resource is gone, and callers then report an error instead: answering
// "gone" on a misconfiguration would delete Nodes or leak load balancers.
// getOne fetches one resource at path into a new T. It returns (nil, nil)
// only when the cloud answered that the resource does not exist: every
// other failure is an error, so no caller can mistake an outage for
// absence.
func getOne[T any](p *Provider, ctx context.Context, what, path string) (*T, error) {
	resp, err := p.request(ctx, what, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == 200:
		v := new(T)
		if err := decode(what, "GET", path, resp, v); err != nil {
			return nil, err
		}
		return v, nil
	case gone(resp):
		return nil, nil
	}
	return nil, failure(what, "GET", path, resp)
}

func gone(resp *abi.HTTPResponse) bool {
	if resp.StatusCode != 404 {
		return false
	}
	if ct := resp.Header("Content-Type"); !strings.HasPrefix(strings.TrimSpace(ct), "application/json") {
		return false
	}
	var e struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(resp.Body, &e) != nil || e.Error == nil {
		return false
	}
	return !strings.HasPrefix(*e.Error, "no such endpoint")
}

// decode unmarshals a successful response body.
func decode(what, method, path string, resp *abi.HTTPResponse, v any) error {
	if err := json.Unmarshal(resp.Body, v); err != nil {
		return errors.New("simcloud: " + what + ": " + method + " " + path + ": decoding the cloud's " +
			strconv.Itoa(int(resp.StatusCode)) + " response: " + err.Error())
	}
	return nil
}

// ---- errors ----

// notFound is an error that matches sdk.ErrNotFound.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Unwrap() error { return sdk.ErrNotFound }

func errNotFound(msg string) error { return &notFound{msg: "simcloud: " + msg} }

// ---- helpers ----

func (p *Provider) logf(level abi.LogLevel, msg string) {
	if p.host.LogEnabled(level) {
		p.host.Log(level, "simcloud: "+msg)
	}
}

// escape percent-encodes s for use as a URL path segment or query value:
// everything but RFC 3986's unreserved characters is escaped.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	out := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			out = append(out, c)
		} else {
			out = append(out, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(out)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// validName reports whether s is a valid simcloud name or ID: 1-128 of
// [A-Za-z0-9._-], starting with a letter or digit.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// quote is strconv.Quote, shorter to read in messages.
func quote(s string) string { return strconv.Quote(s) }
