package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wasmccm/wasmccm/abi"
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

// newModuleAuthenticator is the authenticator of a module run by the host:
// every origin a credential is bound to must be allowed.
func newModuleAuthenticator(cfg Config, store *credentials.Store) (*credentials.Authenticator, error) {
	allowed, err := origin.ParseSet(cfg.HTTP.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	return credentials.New(cfg.Name, cfg.Credentials, allowed, store)
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

// httpClient performs the http_do host function for one module.
type httpClient struct {
	module  string
	cfg     HTTPConfig
	allowed allowlist
	client  *http.Client
	flights flights
	// shadow makes the module's requests yield the rate budget to the
	// module in service (RateBudget).
	shadow atomic.Bool
}

func newHTTPClient(module string, cfg HTTPConfig) (*httpClient, error) {
	allowed, err := ParseAllowedOrigins(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	rt := cfg.Transport
	if rt == nil {
		dialer := &guardedDialer{allowedIPs: allowed.literalIPs(), lookup: net.DefaultResolver.LookupIPAddr,
			dialer: net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}}
		rt = &http.Transport{
			// No Proxy: a proxy from the environment would carry requests
			// past the dial-time checks.
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			// A response's headers reach the module with its body, so they
			// are bounded like it rather than by net/http's larger default.
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
		}
	}
	if cfg.Wrap != nil {
		rt = cfg.Wrap(rt)
	}
	if cfg.auth != nil {
		rt = cfg.auth.Transport(rt)
	}
	h := &httpClient{module: module, cfg: cfg, allowed: allowed}
	h.shadow.Store(cfg.Shadow)
	h.client = &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			_, err := allowed.check(req.URL)
			return err
		},
	}
	return h, nil
}

// do performs req and always answers an HTTPResponse: failures are
// reported in its Error field so the guest can tell them apart. A shadow's
// request the rate budget refused, its own or one it joined, is noted in
// ctx's call (noteShadowRefusal).
func (h *httpClient) do(ctx context.Context, req *abi.HTTPRequest) *abi.HTTPResponse {
	var s sent
	if key, coalescable := coalesceKey(req); coalescable {
		var joined bool
		s, joined = h.flights.do(ctx, key, func() sent { return h.send(ctx, req) })
		if joined {
			httpCoalesced.WithLabelValues(h.module, s.hostLabel).Inc()
		}
	} else {
		s = h.send(ctx, req)
	}
	if s.shadowRefused {
		noteShadowRefusal(ctx)
	}
	return s.resp
}

// sent is what became of a request: the module's answer, the origin's
// label, and whether the rate budget refused it for want of spare room
// because the module is in shadow.
type sent struct {
	resp          *abi.HTTPResponse
	hostLabel     string
	shadowRefused bool
}

// send performs req and counts it.
func (h *httpClient) send(ctx context.Context, req *abi.HTTPRequest) sent {
	if !isRead(req.Method) {
		h.flights.write()
		defer h.flights.write()
	}
	// Read once: a promotion during the request must not make a refusal
	// of the shadow pass for the module in service's.
	shadow := h.shadow.Load()
	resp, hostLabel, code := h.roundTrip(ctx, req, shadow)
	httpRequests.WithLabelValues(h.module, hostLabel, code).Inc()
	// A shadow's request never waits for the budget (RateBudget), so every
	// refusal of one is for want of spare room.
	return sent{resp: resp, hostLabel: hostLabel, shadowRefused: shadow && code == codeThrottled}
}

// maxResponseHeaderBytes bounds the headers of a cloud response.
const maxResponseHeaderBytes = 1 << 20

// Values of the host label of requests that reached no allowed origin. A
// label never carries what the module wrote: a module making requests to
// ever new host names would otherwise make ever new metric series, memory
// the host never gets back.
const (
	hostLabelDenied  = "denied"
	hostLabelInvalid = "invalid"
)

// roundTrip performs req; hostLabel is the allowed origin it went to, as
// the operator's configuration lists it, or one of the fixed values above.
func (h *httpClient) roundTrip(ctx context.Context, req *abi.HTTPRequest, shadow bool) (resp *abi.HTTPResponse, hostLabel, code string) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return &abi.HTTPResponse{Error: "invalid URL: " + err.Error()}, hostLabelInvalid, "invalid"
	}
	dest, err := h.allowed.check(u)
	if err != nil {
		return &abi.HTTPResponse{Error: err.Error()}, hostLabelDenied, "denied"
	}
	hostLabel = dest.String()
	hreq, err := h.newRequest(ctx, req, u)
	if err != nil {
		if denied := deniedBy(err); denied != nil {
			return &abi.HTTPResponse{Error: denied.Error()}, hostLabel, "denied"
		}
		return &abi.HTTPResponse{Error: err.Error()}, hostLabel, "invalid"
	}
	timeout := h.cfg.Timeout
	if req.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	// Only a request the host will send waits for the rate budget, and the
	// wait is bounded by the call's deadline, not by the request's
	// timeout, which starts when the request is sent.
	if refused, code := h.cfg.Budget.wait(ctx, hostLabel, timeout, shadow); refused != nil {
		return refused, hostLabel, code
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Every answer, error included, may quote the request as the host
	// sent it; it is cleaned before the module, or a caller it is
	// coalesced with, sees it.
	defer func() { h.cfg.auth.Redact(resp) }()
	hresp, err := h.client.Do(hreq.WithContext(ctx))
	if err != nil {
		if denied := deniedBy(err); denied != nil {
			return &abi.HTTPResponse{Error: denied.Error()}, hostLabel, "denied"
		}
		var netErr net.Error
		if ctx.Err() != nil || errors.As(err, &netErr) && netErr.Timeout() {
			return &abi.HTTPResponse{Error: fmt.Sprintf("request to %s timed out", hostLabel)}, hostLabel, "timeout"
		}
		return &abi.HTTPResponse{Error: err.Error()}, hostLabel, "error"
	}
	defer hresp.Body.Close()
	h.cfg.Budget.observe(hostLabel, hresp.StatusCode, hresp.Header)
	body, err := io.ReadAll(io.LimitReader(hresp.Body, h.cfg.MaxResponseBytes+1))
	if err != nil {
		return &abi.HTTPResponse{Error: "reading response: " + err.Error()}, hostLabel, "error"
	}
	if int64(len(body)) > h.cfg.MaxResponseBytes {
		return &abi.HTTPResponse{Error: fmt.Sprintf("response body exceeds %d bytes", h.cfg.MaxResponseBytes)}, hostLabel, "too_large"
	}
	out := &abi.HTTPResponse{StatusCode: int32(hresp.StatusCode), Body: body}
	for name, values := range hresp.Header {
		for _, v := range values {
			out.Headers = append(out.Headers, abi.Header{Name: name, Value: v})
		}
	}
	return out, hostLabel, strconv.Itoa(hresp.StatusCode)
}
