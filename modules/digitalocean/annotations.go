package digitalocean

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// The Service annotations of the official CCM that this provider reads.
// README.md lists them with their defaults, and those it does not support.
const (
	annPrefix                = "service.beta.kubernetes.io/do-loadbalancer-"
	annName                  = annPrefix + "name"
	annProtocol              = annPrefix + "protocol"
	annHTTPPorts             = annPrefix + "http-ports"
	annTLSPorts              = annPrefix + "tls-ports"
	annHTTP2Ports            = annPrefix + "http2-ports"
	annTLSPassthrough        = annPrefix + "tls-passthrough"
	annCertificateID         = annPrefix + "certificate-id"
	annHostname              = annPrefix + "hostname"
	annAlgorithm             = annPrefix + "algorithm"
	annSizeSlug              = annPrefix + "size-slug"
	annSizeUnit              = annPrefix + "size-unit"
	annHCPath                = annPrefix + "healthcheck-path"
	annHCPort                = annPrefix + "healthcheck-port"
	annHCProtocol            = annPrefix + "healthcheck-protocol"
	annHCOverride            = annPrefix + "override-health-check"
	annHCInterval            = annPrefix + "healthcheck-check-interval-seconds"
	annHCTimeout             = annPrefix + "healthcheck-response-timeout-seconds"
	annHCUnhealthy           = annPrefix + "healthcheck-unhealthy-threshold"
	annHCHealthy             = annPrefix + "healthcheck-healthy-threshold"
	annStickyType            = annPrefix + "sticky-sessions-type"
	annStickyCookieName      = annPrefix + "sticky-sessions-cookie-name"
	annStickyCookieTTL       = annPrefix + "sticky-sessions-cookie-ttl"
	annRedirectHTTPToHTTPS   = annPrefix + "redirect-http-to-https"
	annProxyProtocol         = annPrefix + "enable-proxy-protocol"
	annBackendKeepalive      = annPrefix + "enable-backend-keepalive"
	annDisableLetsEncryptDNS = annPrefix + "disable-lets-encrypt-dns-records"
	annHTTPIdleTimeout       = annPrefix + "http-idle-timeout-seconds"
	annAllowRules            = annPrefix + "allow-rules"
	annDenyRules             = annPrefix + "deny-rules"
	annType                  = annPrefix + "type"
	annNetwork               = annPrefix + "network"
	annNetworkStack          = annPrefix + "network-stack"
	annIP                    = annPrefix + "ip"
	annSubnetUUID            = annPrefix + "subnet-uuid"
	// annDisown leaves the load balancer alone: no change, no deletion.
	annDisown = "service.kubernetes.io/do-loadbalancer-disown"
	// annLoadBalancerID is where the official CCM records a load
	// balancer's ID on its Service; the provider reads it to find the
	// load balancer, but cannot write it (a module does not patch
	// Services).
	annLoadBalancerID = "kubernetes.digitalocean.com/load-balancer-id"
)

// unsupported are official annotations whose feature this provider lacks.
// A Service that sets one is refused with an error naming it, rather than
// given a load balancer that silently differs from what it asks for.
var unsupported = []string{
	annPrefix + "certificate-name", // needs the certificates API, by name
	annPrefix + "http3-port",
}

// annotations reads a Service's annotations and remembers the first
// malformed one, so that a builder can read many and check once.
type annotations struct {
	m   map[string]string
	err error
}

func (a *annotations) fail(name, value, want string) {
	if a.err == nil {
		a.err = errors.New("digitalocean: annotation " + name + "=" + strconv.Quote(value) + ": " + want)
	}
}

func (a *annotations) str(name string) string { return a.m[name] }

func (a *annotations) bool(name string) bool {
	s, ok := a.m[name]
	if !ok {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		a.fail(name, s, "not a boolean")
	}
	return v
}

// int reads a whole number, def when the annotation is absent.
func (a *annotations) int(name string, def int) int {
	s, ok := a.m[name]
	if !ok {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		a.fail(name, s, "not a whole number")
	}
	return v
}

// ports reads a comma-separated list of ports.
func (a *annotations) ports(name string) []int {
	s, ok := a.m[name]
	if !ok {
		return nil
	}
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v > 65535 {
			a.fail(name, s, "not a comma-separated list of ports")
			return nil
		}
		out = append(out, v)
	}
	return out
}

// list reads a comma-separated list of strings.
func (a *annotations) list(name string) []string {
	s := a.m[name]
	if s == "" {
		return nil
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// oneOf reads a value among allowed; def when the annotation is absent
// or empty.
func (a *annotations) oneOf(name, def string, allowed ...string) string {
	s := a.m[name]
	if s == "" {
		return def
	}
	for _, v := range allowed {
		if s == v {
			return s
		}
	}
	a.fail(name, s, "not one of "+strings.Join(allowed, ", "))
	return def
}

// checkSupported refuses a Service that uses an unsupported annotation.
func checkSupported(svc *abi.Service) error {
	for _, name := range unsupported {
		if _, ok := svc.Annotations[name]; ok {
			return errors.New("digitalocean: annotation " + name + " is not supported by this provider (see modules/digitalocean/README.md)")
		}
	}
	return nil
}
