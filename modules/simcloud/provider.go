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
//	  "tokenCredential": "token",            // credential the host authenticates requests with; default "token", "" = none
//	  "requestTimeout": "10s",               // optional: per-request timeout, at most the host's
//	  "instanceCacheMaxAge": "10s"           // optional: how old the instance snapshot may be (snapshot.go)
//	}
//
// The module never holds the token: every request names the credential,
// and the host applies it as the cloud-config's credentials.auth says
// (a bearer token for the simulated cloud), reading the Secret at send
// time, so a rotated Secret takes effect on the next call.
package simcloud

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// ProviderIDPrefix is the scheme of simcloud provider IDs: instance
// "i-0001" is node provider ID "simcloud://i-0001".
const ProviderIDPrefix = "simcloud://"

// DefaultTokenCredential is the credential requests name when the config
// does not name one.
const DefaultTokenCredential = "token"

// Provider implements sdk.Provider, sdk.InstancesV2, sdk.LoadBalancer,
// sdk.Routes and sdk.Zones against the simcloud API.
//
// The legacy sdk.Instances interface is deliberately not implemented: the
// controllers build legacy provider IDs from the CCM's provider name
// ("wasm"), which would not be simcloud's.
type Provider struct {
	host sdk.Host
	api  rest.Client

	cluster     string
	routePrefix string
	// instances is the instance snapshot (snapshot.go); instanceMaxAge is
	// how old it may be.
	instances      cache.Snapshot
	instanceMaxAge time.Duration
	// nodeTargets is what the last load balancer call's Node list maps
	// to (loadbalancer.go).
	nodeTargets nodeTargets
	// bodies are the request bodies' buffers (loadbalancer.go).
	bodies bodyBuffers
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
	// InstanceCacheMaxAge is how old the instance snapshot may be.
	InstanceCacheMaxAge string `json:"instanceCacheMaxAge"`
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
			` (known fields: "endpoint", "tokenCredential", "requestTimeout", "instanceCacheMaxAge")`)
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
	p.instanceMaxAge = defaultInstanceCacheMaxAge
	if cfg.InstanceCacheMaxAge != "" {
		if p.instanceMaxAge, err = time.ParseDuration(cfg.InstanceCacheMaxAge); err != nil || p.instanceMaxAge <= 0 {
			return errors.New("simcloud: provider config: instanceCacheMaxAge " + strconv.Quote(cfg.InstanceCacheMaxAge) +
				" is not a positive Go duration such as \"10s\"")
		}
	}
	p.cluster = clusterName
	p.instances = p.newInstanceSnapshot()
	p.api = rest.Client{Host: p.host, Name: "simcloud", BaseURL: endpoint, Credential: credential, Timeout: timeout,
		Absent: gone, ErrorMessage: errorMessage}
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

// Every call goes through the SDK's rest client (p.api): 2xx and the
// statuses a call accepts come back as responses, everything else as an
// error that says what was being done and what the cloud answered, 429 and
// 503 with Retry-After as sdk.RetryAfter.

// getOne fetches one resource at path into a new T. It returns (nil, nil)
// only when the cloud answered that the resource does not exist: every
// other failure is an error, so no caller can mistake an outage for
// absence.
func getOne[T any](p *Provider, ctx context.Context, what, path string) (*T, error) {
	v := new(T)
	_, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: path, NotFound: true, Into: v})
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// gone reports whether a 404 is a definitive "does not exist" from the
// API: one carrying simcloud's JSON error body. A 404 from anything else (a
// proxy, a wrong endpoint path, an unknown API route) is not proof that a
// resource is gone, and callers then report an error instead: answering
// "gone" on a misconfiguration would delete Nodes or leak load balancers.
func gone(resp *abi.HTTPResponse) bool {
	if ct := resp.Header("Content-Type"); !strings.HasPrefix(strings.TrimSpace(ct), "application/json") {
		return false
	}
	var e errorBody
	if e.UnmarshalJSON(resp.Body) != nil || e.Error == nil {
		return false
	}
	return !strings.HasPrefix(*e.Error, "no such endpoint")
}

// errorMessage extracts the {"error": "..."} message of an error response;
// "" lets the rest client quote the body.
func errorMessage(resp *abi.HTTPResponse) string {
	var e errorBody
	if e.UnmarshalJSON(resp.Body) == nil && e.Error != nil {
		return *e.Error
	}
	return ""
}

// errorBody is the cloud's error answer, {"error": "..."}; Error is nil
// when the member is missing or null.
type errorBody struct {
	Error *string `json:"error"`
}

// ---- errors ----

func errNotFound(msg string) error { return sdk.NotFound("simcloud: " + msg) }

// ---- helpers ----

func (p *Provider) logf(level abi.LogLevel, msg string) {
	if p.host.LogEnabled(level) {
		p.host.Log(level, "simcloud: "+msg)
	}
}

// unreserved reports RFC 3986's unreserved characters, which need no
// escaping in a URL.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// validName reports whether s is a valid simcloud name or ID: 1-128 of
// [A-Za-z0-9._-], starting with a letter or digit.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 || !alphanumeric(s[0]) {
		return false
	}
	for i := 0; i < len(s); i += 8 {
		var b [8]byte
		n := copy(b[:], s[i:])
		if notNameBytes(binary.LittleEndian.Uint64(b[:]))&(highBits>>(64-8*n)) != 0 {
			return false
		}
	}
	return true
}

func alphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

const lowBits, highBits = 0x0101010101010101, 0x8080808080808080

// notNameBytes sets the high bit of each byte of x that is not a letter, a
// digit, '-', '_' or '.'. It tests eight bytes as one integer, as
// plainPrefix does and for the same reason.
func notNameBytes(x uint64) uint64 {
	name := inRange(x, 'a', 'z') | inRange(x, 'A', 'Z') | inRange(x, '0', '9') |
		inRange(x, '-', '.') | inRange(x, '_', '_')
	return (^name | x) & highBits
}

// inRange sets the high bit of each byte of x in lo..hi. It is exact for
// bytes below 0x80, so that no subtraction borrows from the next byte;
// notNameBytes refuses the others.
func inRange(x uint64, lo, hi byte) uint64 {
	return ((x | highBits) - lowBits*uint64(lo)) & (lowBits*uint64(0x80+hi) - x) & highBits
}

// quote is strconv.Quote, shorter to read in messages.
func quote(s string) string { return strconv.Quote(s) }
