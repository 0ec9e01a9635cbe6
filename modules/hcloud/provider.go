// Package hcloud is a wasmccm provider for Hetzner Cloud: a drop-in for
// hcloud-cloud-controller-manager's cloud servers, load balancers and
// network routes. It sets the same provider IDs ("hcloud://<server id>"),
// addresses, labels and load balancer configuration, and reads the same
// Service annotations (load-balancer.hetzner.cloud/...), so that a cluster
// can switch between the two without changing its Nodes or Services.
//
// The same code runs inside the wasm module (modules/hcloud/module) and
// natively with a Host from package sdk/native. It uses only the standard
// library and the SDK, so it builds with TinyGo as well as with Go; every
// request goes through the SDK's rest client and so through Host.HTTP.
//
// The provider config is JSON; every field is optional:
//
//	{
//	  "endpoint": "https://api.hetzner.cloud/v1", // HCLOUD_ENDPOINT
//	  "tokenCredential": "token",                // credential the host authenticates requests with (HCLOUD_TOKEN)
//	  "network": "k8s",                          // network name or ID (HCLOUD_NETWORK): private IPs, routes, LB attachment
//	  "addressFamily": "ipv4",                   // ipv4, ipv6 or dualstack (HCLOUD_INSTANCES_ADDRESS_FAMILY)
//	  "zoneLabel": true,                         // set the zone label (HCLOUD_INSTANCES_ZONE_LABEL_ENABLED)
//	  "requestTimeout": "10s",
//	  "callTimeout": "20s",                      // only on a host that gives no deadline; see below
//	  "serverCacheMaxAge": "10s",                // how old the server snapshot may be (HCLOUD_SERVER_CACHE_TTL); "off": none
//	  "loadBalancers": {
//	    "location": "fsn1", "networkZone": "", "type": "lb11", "algorithmType": "",
//	    "usePrivateIP": false, "disablePrivateIngress": false, "disableIPv6": false,
//	    "disablePublicNetwork": false
//	  }
//	}
//
// Load balancer and route changes are asynchronous actions, which the
// provider waits for until shortly before the call's deadline, which the
// host gives the module (sdk/export/deadline): actions still running then
// make the call return RetryAfter, and the next call carries on from what
// is done. On a host too old to give a deadline (ABI revision 3 and
// older), callTimeout stands in for it; keep it below that host's
// limits.callTimeout, which ends the call without an answer.
//
// Hetzner Robot (dedicated) servers are not supported: their provider IDs
// are answered with an error, never with "does not exist".
package hcloud

import (
	"bytes"
	"context"
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

// DefaultEndpoint is the Hetzner Cloud API.
const DefaultEndpoint = "https://api.hetzner.cloud/v1"

// DefaultTokenCredential is the credential requests name when the config
// does not name one. The module never reads the API token: the host sends
// it, as the cloud-config's credentials.auth binds it to the API's origin.
const DefaultTokenCredential = "token"

// Provider implements sdk.Provider, sdk.InstancesV2, sdk.LoadBalancer and
// sdk.Routes against the Hetzner Cloud API.
type Provider struct {
	host sdk.Host
	api  rest.Client
	cfg  config

	// callTimeout bounds load balancer and route calls that have no
	// deadline of their own.
	callTimeout time.Duration
	// networkID caches the configured network's ID once resolved.
	networkID int64
	// servers is the server snapshot (servers.go), serverMaxAge how old it
	// may be for instance lookups.
	servers      cache.Snapshot
	serverMaxAge time.Duration
}

// defaultCallTimeout leaves a third of the CCM's default 30s call timeout
// for the answer to travel and for slow requests.
const defaultCallTimeout = 20 * time.Second

var (
	_ sdk.Provider           = (*Provider)(nil)
	_ sdk.InstancesV2        = (*Provider)(nil)
	_ sdk.LoadBalancer       = (*Provider)(nil)
	_ sdk.LoadBalancerLister = (*Provider)(nil)
	_ sdk.Routes             = (*Provider)(nil)
)

// New returns a provider that reaches the cloud through host. It must be
// initialized with Init before use.
func New(host sdk.Host) *Provider { return &Provider{host: host} }

// config is the provider config; the comments name the official CCM's
// environment variable each field replaces.
type config struct {
	Endpoint        string  `json:"endpoint"`
	TokenCredential *string `json:"tokenCredential"`
	Network         string  `json:"network"`
	AddressFamily   string  `json:"addressFamily"`
	ZoneLabel       *bool   `json:"zoneLabel"`
	RequestTimeout  string  `json:"requestTimeout"`
	CallTimeout     string  `json:"callTimeout"`
	// ServerCacheMaxAge is HCLOUD_SERVER_CACHE_TTL.
	ServerCacheMaxAge string     `json:"serverCacheMaxAge"`
	LoadBalancers     lbDefaults `json:"loadBalancers"`
}

// lbDefaults are the cluster-wide load balancer settings that annotations
// override (HCLOUD_LOAD_BALANCERS_*).
type lbDefaults struct {
	Location              string `json:"location"`
	NetworkZone           string `json:"networkZone"`
	Type                  string `json:"type"`
	AlgorithmType         string `json:"algorithmType"`
	UsePrivateIP          bool   `json:"usePrivateIP"`
	DisablePrivateIngress bool   `json:"disablePrivateIngress"`
	DisableIPv6           bool   `json:"disableIPv6"`
	DisablePublicNetwork  *bool  `json:"disablePublicNetwork"`
}

// Init parses the provider config. It does not contact the cloud, so an
// unreachable API at start-up does not make the module unusable.
func (p *Provider) Init(_ context.Context, _ string, raw []byte) error {
	var cfg config
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return errors.New("hcloud: parsing provider config: " + err.Error())
		}
		if dec.More() {
			return errors.New("hcloud: parsing provider config: data after the JSON object")
		}
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if !strings.HasPrefix(cfg.Endpoint, "https://") && !strings.HasPrefix(cfg.Endpoint, "http://") ||
		strings.ContainsAny(cfg.Endpoint, "?# \t\r\n") {
		return errors.New("hcloud: provider config: endpoint " + strconv.Quote(cfg.Endpoint) +
			" must be an http(s) URL without query or fragment, e.g. " + strconv.Quote(DefaultEndpoint))
	}
	switch cfg.AddressFamily {
	case "":
		cfg.AddressFamily = "ipv4"
	case "ipv4", "ipv6", "dualstack":
	default:
		return errors.New("hcloud: provider config: addressFamily " + strconv.Quote(cfg.AddressFamily) + " is not ipv4, ipv6 or dualstack")
	}
	if cfg.ZoneLabel == nil {
		enabled := true
		cfg.ZoneLabel = &enabled
	}
	if a := cfg.LoadBalancers.AlgorithmType; a != "" && a != "round_robin" && a != "least_connections" {
		return errors.New("hcloud: provider config: loadBalancers.algorithmType " + strconv.Quote(a) + " is not round_robin or least_connections")
	}
	timeout, err := positiveDuration("requestTimeout", cfg.RequestTimeout, 0)
	if err != nil {
		return err
	}
	callTimeout, err := positiveDuration("callTimeout", cfg.CallTimeout, defaultCallTimeout)
	if err != nil {
		return err
	}
	var serverMaxAge time.Duration // "off": every lookup asks the API
	if cfg.ServerCacheMaxAge != "off" {
		if serverMaxAge, err = positiveDuration("serverCacheMaxAge", cfg.ServerCacheMaxAge, defaultServerCacheMaxAge); err != nil {
			return err
		}
	}
	credential := DefaultTokenCredential
	if cfg.TokenCredential != nil {
		credential = *cfg.TokenCredential
	}
	p.cfg, p.callTimeout, p.networkID, p.serverMaxAge = cfg, callTimeout, 0, serverMaxAge
	p.servers = p.newServerSnapshot()
	p.api = rest.Client{Host: p.host, Name: "hcloud", BaseURL: strings.TrimRight(cfg.Endpoint, "/"), Credential: credential,
		Timeout: timeout, Absent: isNotFound, ErrorMessage: errorMessage, RetryLater: retryLater}
	if id, err := strconv.ParseInt(cfg.Network, 10, 64); err == nil && id > 0 {
		p.networkID = id
	}
	p.logf(abi.LogInfo, "using endpoint "+p.api.BaseURL+networkNote(cfg.Network))
	return nil
}

// positiveDuration parses a config duration; def when it is empty.
func positiveDuration(field, value string, def time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return 0, errors.New("hcloud: provider config: " + field + " " + strconv.Quote(value) + " is not a positive duration such as \"10s\"")
	}
	return d, nil
}

// bounded returns the context by whose deadline the provider stops
// waiting on the cloud: ctx's own, which inside a module is the call's
// less the SDK's reserve for the answer, or callTimeout from now for a
// call without one (a host that gives no deadline).
func (p *Provider) bounded(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); ok {
		return ctx
	}
	return deadlineContext{ctx, time.Now().Add(p.callTimeout)}
}

// deadlineContext adds a deadline to a context without the timer that
// context.WithDeadline starts: a TinyGo module built with -scheduler=none
// runs no goroutines, and everything here checks Err and Deadline rather
// than waiting on Done.
type deadlineContext struct {
	context.Context
	deadline time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c deadlineContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func networkNote(network string) string {
	if network == "" {
		return " without a network"
	}
	return " with network " + strconv.Quote(network)
}

// apiError is the body of every error the API answers.
type apiError struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAPIError(resp *abi.HTTPResponse) (code, msg string, ok bool) {
	var e apiError
	if !strings.HasPrefix(resp.Header("Content-Type"), "application/json") || json.Unmarshal(resp.Body, &e) != nil || e.Error == nil {
		return "", "", false
	}
	return e.Error.Code, e.Error.Message, true
}

// isNotFound reports whether a 404 is the API's own "not_found" answer
// about the requested object. A 404 without that body (a proxy, a wrong
// endpoint) proves nothing, and must not make a Node or load balancer look
// gone.
func isNotFound(resp *abi.HTTPResponse) bool {
	code, msg, ok := decodeAPIError(resp)
	return ok && code == "not_found" && !strings.HasPrefix(msg, "no such endpoint")
}

// retryLater judges the API's "locked" (a resource busy with another
// action) and "conflict" (it changed meanwhile) passing: the call is
// asked again after retryRunning, as for an action that outlives a call,
// rather than failed, as hcloud-go also retries them.
func retryLater(resp *abi.HTTPResponse) (time.Duration, bool) {
	code, _, ok := decodeAPIError(resp)
	return retryRunning, ok && (code == "locked" || code == "conflict")
}

func errorMessage(resp *abi.HTTPResponse) string {
	if code, msg, ok := decodeAPIError(resp); ok {
		return msg + " (" + code + ")"
	}
	return ""
}

func (p *Provider) logf(level abi.LogLevel, msg string) {
	if p.host.LogEnabled(level) {
		p.host.Log(level, "hcloud: "+msg)
	}
}
