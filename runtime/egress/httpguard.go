package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/origin"
)

// allowlist is the set of origins a module may reach.
type allowlist origin.Set

// ParseAllowedOrigins validates "scheme://host[:port]" entries
// (origin.ParseSet).
func ParseAllowedOrigins(entries []string) (allowlist, error) {
	set, err := origin.ParseSet(entries)
	return allowlist(set), err
}

// check refuses a URL whose origin is not on the list, and returns the
// origin of one that is.
func (l allowlist) check(u *url.URL) (origin.Origin, error) {
	o, err := origin.Of(u)
	if err != nil {
		return origin.Origin{}, &deniedError{fmt.Sprintf("destination %q: %v", u.Redacted(), err)}
	}
	if !l[o] {
		return origin.Origin{}, &deniedError{fmt.Sprintf("destination %s is not in the module's allowed origins", o)}
	}
	return o, nil
}

// literalIPs returns the IP literals on the list: the only way to reach an
// internal address (see isInternal).
func (l allowlist) literalIPs() map[string]bool {
	ips := map[string]bool{}
	for o := range l {
		if ip := net.ParseIP(o.Host); ip != nil {
			ips[ip.String()] = true
		}
	}
	return ips
}

// deniedError is a refusal by policy, as opposed to a network failure.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return "denied: " + e.msg }

// deniedBy returns the refusal by policy err holds, the host's or the
// credentials' (credentials.DeniedError), or nil.
func deniedBy(err error) error {
	var host *deniedError
	if errors.As(err, &host) {
		return host
	}
	var creds *credentials.DeniedError
	if errors.As(err, &creds) {
		return creds
	}
	return nil
}

// isInternal reports addresses no provider needs by name but an attacker
// wants: the host itself, link-local (where cloud metadata services live),
// and addresses that are not destinations at all.
func isInternal(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified()
}

// guardedDialer resolves names itself and dials the address it checked, so
// that a DNS answer cannot change between the check and the connection.
type guardedDialer struct {
	allowedIPs map[string]bool
	lookup     func(ctx context.Context, host string) ([]net.IPAddr, error)
	dialer     net.Dialer
}

func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip != nil {
		if isInternal(ip) && !g.allowedIPs[ip.String()] {
			return nil, &deniedError{fmt.Sprintf("address %s is internal and not allowed by IP", ip)}
		}
		return g.dialer.DialContext(ctx, network, addr)
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var lastErr error = fmt.Errorf("%s resolved to no address", host)
	for _, a := range addrs {
		if isInternal(a.IP) {
			return nil, &deniedError{fmt.Sprintf("%s resolves to internal address %s; allow it by IP to reach it", host, a.IP)}
		}
	}
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.IP.String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}
