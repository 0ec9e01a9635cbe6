package egress

import (
	"net/http"
	"time"
)

// Config governs a module's requests, those of the http_do host function.
type Config struct {
	// AllowedOrigins lists "scheme://host[:port]" destinations. Anything
	// else is refused, redirects included. A name that resolves to a
	// loopback, link-local (cloud metadata), unspecified or multicast
	// address is refused too; such an address is reachable only when
	// listed as an IP literal.
	AllowedOrigins []string
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// MaxRequestBytes bounds an encoded request. Default 1 MiB.
	MaxRequestBytes int
	// MaxResponseBytes bounds a response body. Default 4 MiB.
	MaxResponseBytes int64
	// Transport replaces the guarded network transport, for in-process
	// tests and benchmarks; the allowlist is still enforced on URLs.
	Transport http.RoundTripper
	// Wrap, when set, wraps the transport (guarded or Transport), so that
	// tools can observe every request a module makes and inject faults
	// into it, as wasmccm test and call -trace do. The allowlist is checked
	// before a request reaches the wrapper.
	Wrap func(http.RoundTripper) http.RoundTripper
	// Budget holds back requests to the origins it limits (RateBudget).
	// Give every module of a process the same one: the cloud's quota is
	// per project, whichever module generation spends it. nil limits
	// nothing.
	Budget *RateBudget
	// Shadow starts the module as a candidate in shadow: its requests get
	// only the Budget's spare room and never delay the module in service's,
	// its init's included, until Client.SetShadow(false) promotes it.
	Shadow bool
}

// WithDefaults returns c with every zero field set to the default
// documented on it.
func (c Config) WithDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 1 << 20
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 4 << 20
	}
	return c
}
