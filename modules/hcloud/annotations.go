package hcloud

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// The Service annotations of the official CCM that this provider reads.
// README.md lists them with their defaults, and those it does not support.
const (
	annPrefix                = "load-balancer.hetzner.cloud/"
	annName                  = annPrefix + "name"
	annHostname              = annPrefix + "hostname"
	annType                  = annPrefix + "type"
	annLocation              = annPrefix + "location"
	annNetworkZone           = annPrefix + "network-zone"
	annAlgorithmType         = annPrefix + "algorithm-type"
	annDisablePublicNetwork  = annPrefix + "disable-public-network"
	annDisablePrivateIngress = annPrefix + "disable-private-ingress"
	annIPv6Disabled          = annPrefix + "ipv6-disabled"
	annUsePrivateIP          = annPrefix + "use-private-ip"
	annPrivateIPv4           = annPrefix + "private-ipv4"
	annProtocol              = annPrefix + "protocol"
	annProxyProtocol         = annPrefix + "uses-proxyprotocol"
	annCookieName            = annPrefix + "http-cookie-name"
	annCookieLifetime        = annPrefix + "http-cookie-lifetime"
	annRedirectHTTP          = annPrefix + "http-redirect-http"
	annStickySessions        = annPrefix + "http-sticky-sessions"
	annHCProtocol            = annPrefix + "health-check-protocol"
	annHCPort                = annPrefix + "health-check-port"
	annHCInterval            = annPrefix + "health-check-interval"
	annHCTimeout             = annPrefix + "health-check-timeout"
	annHCRetries             = annPrefix + "health-check-retries"
	annHCHTTPDomain          = annPrefix + "health-check-http-domain"
	annHCHTTPPath            = annPrefix + "health-check-http-path"
	annHCHTTPValidateCert    = annPrefix + "health-check-http-validate-certificate"
	annHCHTTPStatusCodes     = annPrefix + "http-status-codes"
)

// unsupported are official annotations whose feature this provider lacks.
// A Service that sets one is refused with an error naming it, rather than
// given a load balancer that silently differs from what it asks for.
var unsupported = []string{
	annPrefix + "node-selector", // Nodes reach a module without their labels
	annPrefix + "ipv4-rdns",
	annPrefix + "ipv6-rdns",
	annPrefix + "certificate-type",
	annPrefix + "http-certificates",
	annPrefix + "http-managed-certificate-name",
	annPrefix + "http-managed-certificate-domains",
	annPrefix + "http-managed-certificate-acme-staging",
	annPrefix + "http-timeout-idle",
	annPrefix + "private-subnet-ip-range",
}

// annotations reads a Service's annotations and remembers the first
// malformed one, so that a builder can read many and check once.
type annotations struct {
	m   map[string]string
	err error
}

func (a *annotations) fail(name, value, want string) {
	if a.err == nil {
		a.err = errors.New("hcloud: annotation " + name + "=" + strconv.Quote(value) + ": " + want)
	}
}

func (a *annotations) str(name string) (string, bool) {
	v, ok := a.m[name]
	return v, ok
}

func (a *annotations) bool(name string) (v, ok bool) {
	s, ok := a.m[name]
	if !ok {
		return false, false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		a.fail(name, s, "not a boolean")
		return false, false
	}
	return v, true
}

func (a *annotations) int(name string) (int, bool) {
	s, ok := a.m[name]
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		a.fail(name, s, "not an integer")
		return 0, false
	}
	return v, true
}

// seconds reads a Go duration ("15s") as the API's whole seconds.
func (a *annotations) seconds(name string) (int, bool) {
	s, ok := a.m[name]
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		a.fail(name, s, "not a duration such as \"15s\"")
		return 0, false
	}
	return int(d / time.Second), true
}

func (a *annotations) strings(name string) ([]string, bool) {
	s, ok := a.m[name]
	if !ok {
		return nil, false
	}
	return strings.Split(s, ","), true
}

// protocol reads a load balancer protocol: tcp, http or https.
func (a *annotations) protocol(name string) (string, bool) {
	s, ok := a.m[name]
	if !ok {
		return "", false
	}
	switch s {
	case "tcp", "http", "https":
		return s, true
	}
	a.fail(name, s, "not tcp, http or https")
	return "", false
}

// checkSupported refuses a Service that uses an unsupported annotation.
func checkSupported(svc *abi.Service) error {
	for _, name := range unsupported {
		if _, ok := svc.Annotations[name]; ok {
			return errors.New("hcloud: annotation " + name + " is not supported by this provider (see modules/hcloud/README.md)")
		}
	}
	return nil
}
