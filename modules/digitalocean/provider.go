// Package digitalocean is a wasmccm provider for DigitalOcean: a drop-in for
// digitalocean-cloud-controller-manager's droplets and load balancers. It
// sets the same provider IDs ("digitalocean://<droplet id>"), addresses
// and labels on Nodes, reads the same Service annotations
// (service.beta.kubernetes.io/do-loadbalancer-...) and names load
// balancers as the official CCM does, so that a cluster can switch between
// the two without recreating its load balancers.
//
// The same code runs inside the wasm module (modules/digitalocean/module)
// and natively with a Host from package sdk/native. It uses only the
// standard library and the SDK, so it builds with TinyGo as well as with
// Go; every request goes through the SDK's rest client and so through
// Host.HTTP, authenticated by the host with the bearer token the
// cloud-config binds to the API's origin.
//
// The provider config is JSON; every field but region is optional:
//
//	{
//	  "endpoint": "https://api.digitalocean.com", // DO_OVERRIDE_URL
//	  "tokenCredential": "token",                 // credential the host authenticates requests with (DO_ACCESS_TOKEN)
//	  "region": "fra1",                           // REGION: where load balancers are created
//	  "clusterID": "",                            // DO_CLUSTER_ID: load balancers are tagged k8s:<clusterID>
//	  "vpcID": "",                                // DO_CLUSTER_VPC_ID: the VPC of new load balancers
//	  "defaultLoadBalancerType": "REGIONAL_NETWORK", // DEFAULT_LB_TYPE
//	  "requestTimeout": "10s",
//	  "dropletCacheMaxAge": "10s"                 // how old the droplet snapshot may be; "off": none
//	}
package digitalocean

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

// DefaultEndpoint is the DigitalOcean API; paths start with /v2.
const DefaultEndpoint = "https://api.digitalocean.com"

// DefaultTokenCredential is the credential requests name when the config
// does not name one. The module never reads the API token: the host sends
// it, as the cloud-config's credentials.auth binds it to the API's origin.
const DefaultTokenCredential = "token"

// Load balancer types, networks and network stacks of the API.
const (
	typeRegional        = "REGIONAL"
	typeRegionalNetwork = "REGIONAL_NETWORK"
	networkExternal     = "EXTERNAL"
	networkInternal     = "INTERNAL"
	stackIPv4           = "IPV4"
	stackDualstack      = "DUALSTACK"
)

// Provider implements sdk.Provider, sdk.InstancesV2, sdk.LoadBalancer and
// sdk.LoadBalancerLister against the DigitalOcean API.
type Provider struct {
	host sdk.Host
	api  rest.Client
	cfg  config

	// droplets is the droplet snapshot (droplets.go), dropletMaxAge how
	// old it may be.
	droplets      cache.Snapshot
	dropletMaxAge time.Duration
}

var (
	_ sdk.Provider           = (*Provider)(nil)
	_ sdk.InstancesV2        = (*Provider)(nil)
	_ sdk.LoadBalancer       = (*Provider)(nil)
	_ sdk.LoadBalancerLister = (*Provider)(nil)
)

// New returns a provider that reaches the cloud through host. It must be
// initialized with Init before use.
func New(host sdk.Host) *Provider { return &Provider{host: host} }

// config is the provider config; the comments name the official CCM's
// environment variable each field replaces.
type config struct {
	Endpoint                string  `json:"endpoint"`                // DO_OVERRIDE_URL
	TokenCredential         *string `json:"tokenCredential"`         // DO_ACCESS_TOKEN
	Region                  string  `json:"region"`                  // REGION
	ClusterID               string  `json:"clusterID"`               // DO_CLUSTER_ID
	VPCID                   string  `json:"vpcID"`                   // DO_CLUSTER_VPC_ID
	DefaultLoadBalancerType string  `json:"defaultLoadBalancerType"` // DEFAULT_LB_TYPE
	RequestTimeout          string  `json:"requestTimeout"`
	DropletCacheMaxAge      string  `json:"dropletCacheMaxAge"`
}

// defaultDropletCacheMaxAge is how old the droplet listing may be when a
// Node is looked up.
const defaultDropletCacheMaxAge = 10 * time.Second

// Init parses the provider config. It does not contact the cloud, so an
// unreachable API at start-up does not make the module unusable.
func (p *Provider) Init(_ context.Context, _ string, raw []byte) error {
	var cfg config
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return errors.New("digitalocean: parsing provider config: " + err.Error())
		}
		if dec.More() {
			return errors.New("digitalocean: parsing provider config: data after the JSON object")
		}
	}
	fail := func(msg string) error { return errors.New("digitalocean: provider config: " + msg) }
	cfg.Endpoint = strings.TrimRight(cmpOr(cfg.Endpoint, DefaultEndpoint), "/")
	if !strings.HasPrefix(cfg.Endpoint, "https://") && !strings.HasPrefix(cfg.Endpoint, "http://") || strings.ContainsAny(cfg.Endpoint, "?# \t\r\n") {
		return fail("endpoint " + strconv.Quote(cfg.Endpoint) + " must be an http(s) URL without query or fragment, e.g. " + strconv.Quote(DefaultEndpoint))
	}
	switch cfg.DefaultLoadBalancerType {
	case "":
		cfg.DefaultLoadBalancerType = typeRegionalNetwork // the official CCM's default
	case typeRegional, typeRegionalNetwork:
	default:
		return fail("defaultLoadBalancerType " + strconv.Quote(cfg.DefaultLoadBalancerType) + " is not REGIONAL or REGIONAL_NETWORK")
	}
	if cfg.ClusterID != "" && !validTag(tagOfficialPrefix+cfg.ClusterID) {
		return fail("clusterID " + strconv.Quote(cfg.ClusterID) + " does not make a valid tag (letters, digits, colons, dashes and underscores)")
	}
	timeout, err := positiveDuration("requestTimeout", cfg.RequestTimeout, 0)
	if err != nil {
		return err
	}
	maxAge := time.Duration(0) // "off": every lookup asks the API
	if cfg.DropletCacheMaxAge != "off" {
		if maxAge, err = positiveDuration("dropletCacheMaxAge", cfg.DropletCacheMaxAge, defaultDropletCacheMaxAge); err != nil {
			return err
		}
	}
	credential := DefaultTokenCredential
	if cfg.TokenCredential != nil {
		credential = *cfg.TokenCredential
	}
	p.cfg, p.dropletMaxAge = cfg, maxAge
	p.droplets = cache.Snapshot{Host: p.host, Prefix: "digitalocean/droplets", List: p.listDroplets}
	p.api = rest.Client{Host: p.host, Name: "digitalocean", BaseURL: cfg.Endpoint, Credential: credential,
		Timeout: timeout, Absent: isNotFound, ErrorMessage: errorMessage}
	p.logf(abi.LogInfo, "using endpoint "+p.api.BaseURL)
	return nil
}

// positiveDuration parses a config duration; def when it is empty.
func positiveDuration(field, value string, def time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return 0, errors.New("digitalocean: provider config: " + field + " " + strconv.Quote(value) + " is not a positive duration such as \"10s\"")
	}
	return d, nil
}

// apiError is the body of every error the API answers.
type apiError struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

func decodeAPIError(resp *abi.HTTPResponse) (apiError, bool) {
	var e apiError
	ok := strings.HasPrefix(resp.Header("Content-Type"), "application/json") && json.Unmarshal(resp.Body, &e) == nil && e.ID != ""
	return e, ok
}

// isNotFound reports whether a 404 is the API's own "not_found" answer. A
// 404 without that body (a proxy, a wrong endpoint) proves nothing, and
// must not make a Node or load balancer look gone.
func isNotFound(resp *abi.HTTPResponse) bool {
	e, ok := decodeAPIError(resp)
	return ok && e.ID == "not_found"
}

func errorMessage(resp *abi.HTTPResponse) string {
	if e, ok := decodeAPIError(resp); ok {
		return e.Message + " (" + e.ID + ")"
	}
	return ""
}

func (p *Provider) logf(level abi.LogLevel, msg string) {
	if p.host.LogEnabled(level) {
		p.host.Log(level, "digitalocean: "+msg)
	}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
