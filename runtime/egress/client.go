package egress

import (
	"bytes"
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
)

// Client performs one module's requests, those of its http_do host
// function.
type Client struct {
	module  string
	cfg     Config
	auth    *credentials.Authenticator
	allowed allowlist
	client  *http.Client
	flights flights
	// shadow makes the module's requests yield the rate budget to the
	// module in service (RateBudget).
	shadow atomic.Bool
}

// New makes the client of the module named module, which labels its
// metrics. auth, when set, applies the module's credentials between the
// allowlist and cfg.Wrap; every origin it binds a credential to must be
// allowed.
func New(module string, cfg Config, auth *credentials.Authenticator) (*Client, error) {
	cfg = cfg.WithDefaults()
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
	if auth != nil {
		rt = auth.Transport(rt)
	}
	h := &Client{module: module, cfg: cfg, auth: auth, allowed: allowed}
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

// Do performs req and always answers an HTTPResponse: failures are
// reported in its Error field so the guest can tell them apart.
// shadowRefused says the rate budget refused the request, or the one it
// joined, for want of spare room because the module is in shadow
// (RateBudget): the caller withholds the answer of the call it came in.
func (h *Client) Do(ctx context.Context, req *abi.HTTPRequest) (resp *abi.HTTPResponse, shadowRefused bool) {
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
	return s.resp, s.shadowRefused
}

// SetShadow marks the module as a candidate in shadow, beside the module
// in service, or, with false, as the module in service: a shadow's
// requests get only the rate budget's spare room (RateBudget).
func (h *Client) SetShadow(shadow bool) { h.shadow.Store(shadow) }

// sent is what became of a request: the module's answer, the origin's
// label, and whether the rate budget refused it for want of spare room
// because the module is in shadow.
type sent struct {
	resp          *abi.HTTPResponse
	hostLabel     string
	shadowRefused bool
}

// send performs req and counts it.
func (h *Client) send(ctx context.Context, req *abi.HTTPRequest) sent {
	if !isRead(req) {
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
func (h *Client) roundTrip(ctx context.Context, req *abi.HTTPRequest, shadow bool) (resp *abi.HTTPResponse, hostLabel, code string) {
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
	// sent it, or one it sent for another module; it is cleaned before
	// the module, or a caller it is coalesced with, sees it.
	defer func() { credentials.Redact(resp) }()
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
	body, err := readBody(hresp, h.cfg.MaxResponseBytes)
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

// readBody reads at most limit bytes of resp's body, and one more to tell
// a longer body: into a buffer of the length the cloud announced, when it
// did, so that a listing of thousands of objects is not copied again at
// every doubling as io.ReadAll grows its buffer. bytes.Buffer reads while
// MinRead bytes are free, so that much more lets it meet the end without
// growing.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, limit+1)
	if resp.ContentLength <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(resp.ContentLength, limit+1)+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
