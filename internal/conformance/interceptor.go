package conformance

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault is a failure the suite injects into one of a module's HTTP
// requests, in the host's HTTP layer, where the module cannot tell it from
// the cloud's own. A reset or a timeout is returned at once, as the
// transport reports it, without holding the connection or waiting out the
// deadline: the module sees what it would see, and the run stays fast.
type Fault string

const (
	Fault500       Fault = "500"
	Fault429       Fault = "429+Retry-After"
	FaultReset     Fault = "connection reset"
	FaultTimeout   Fault = "timeout"
	FaultTruncated Fault = "truncated body"
	Fault401       Fault = "401"
)

// Faults is every fault, in the order the suite injects them.
var Faults = []Fault{Fault500, Fault429, FaultReset, FaultTimeout, FaultTruncated, Fault401}

// injectedRetryAfter is the Retry-After of an injected 429, in seconds.
const injectedRetryAfter = 7

// Exchange is one request a module made and what it got, as the trace
// shows it: credentials are redacted and headers left out.
type Exchange struct {
	Method   string
	URL      string
	Status   int    // 0 when no response arrived
	Err      string // transport failure
	Duration time.Duration
	// Injected names the fault that replaced or altered the cloud's
	// answer; "" for a real one.
	Injected Fault
	// BodySize is the size of the body the module received, -1 when the
	// cloud streamed it without a length.
	BodySize int
	// secretInURL records that the URL held a credential before it was
	// redacted.
	secretInURL bool
}

func (e Exchange) String() string {
	var answer string
	switch {
	case e.Err != "":
		answer = "error: " + e.Err
	case e.BodySize < 0: // streamed, of unknown length
		answer = fmt.Sprint(e.Status)
	default:
		answer = fmt.Sprintf("%d (%d bytes)", e.Status, e.BodySize)
	}
	if e.Injected != "" {
		answer += " [injected: " + string(e.Injected) + "]"
	}
	return fmt.Sprintf("%s %s -> %s in %s", e.Method, e.URL, answer, e.Duration.Round(time.Microsecond))
}

// Interceptor sits in the host's HTTP layer (host.HTTPConfig.Wrap): it
// records every request and, when armed, injects a fault into one of them.
type Interceptor struct {
	next    http.RoundTripper
	secrets []string

	mu       sync.Mutex
	log      []Exchange
	fault    Fault
	target   int // index, counted from arming, of the request to fault
	seen     int
	injected bool
}

// NewInterceptor returns an interceptor that redacts the secrets from the
// URLs it records. Wrap it around a transport with Wrap.
func NewInterceptor(secrets []string) *Interceptor {
	return &Interceptor{secrets: secrets, target: -1}
}

// Wrap is the host.HTTPConfig.Wrap hook.
func (i *Interceptor) Wrap(next http.RoundTripper) http.RoundTripper {
	i.next = next
	return i
}

// Arm makes the interceptor inject f into the n-th request (from 0) made
// from now on.
func (i *Interceptor) Arm(f Fault, n int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.fault, i.target, i.seen, i.injected = f, n, 0, false
}

// Disarm stops injecting and reports whether a fault was injected since
// Arm.
func (i *Interceptor) Disarm() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	injected := i.injected
	i.fault, i.target, i.injected = "", -1, false
	return injected
}

// Mark returns the position in the log of the next request, for Since.
func (i *Interceptor) Mark() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.log)
}

// Since returns the exchanges recorded after mark.
func (i *Interceptor) Since(mark int) []Exchange {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]Exchange(nil), i.log[mark:]...)
}

// RoundTrip implements http.RoundTripper.
func (i *Interceptor) RoundTrip(req *http.Request) (*http.Response, error) {
	i.mu.Lock()
	var fault Fault
	if i.target >= 0 && i.seen == i.target {
		fault = i.fault
	}
	i.seen++
	i.mu.Unlock()

	start := time.Now()
	resp, err, injected := i.roundTrip(req, fault)
	raw := req.URL.String()
	ex := Exchange{Method: req.Method, URL: Redact(raw, i.secrets), Duration: time.Since(start)}
	ex.secretInURL = ex.URL != raw
	if injected {
		ex.Injected = fault
	}
	if err != nil {
		ex.Err = err.Error()
	} else {
		ex.Status = resp.StatusCode
		ex.BodySize = int(resp.ContentLength)
	}
	i.mu.Lock()
	i.log = append(i.log, ex)
	i.injected = i.injected || injected
	i.mu.Unlock()
	return resp, err
}

// roundTrip answers req, in the cloud's place when fault says so. The
// truncated-body fault lets the request through and cuts a successful
// answer's body in half, so the cloud did act on it.
func (i *Interceptor) roundTrip(req *http.Request, fault Fault) (*http.Response, error, bool) {
	switch fault {
	case Fault500:
		return synthetic(req, 500, nil, `{"error":"internal error (injected by wasmccm test)"}`), nil, true
	case Fault429:
		return synthetic(req, 429, http.Header{"Retry-After": {fmt.Sprint(injectedRetryAfter)}}, `{"error":"rate limited (injected by wasmccm test)"}`), nil, true
	case Fault401:
		return synthetic(req, 401, nil, `{"error":"unauthorized (injected by wasmccm test)"}`), nil, true
	case FaultReset:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true
	case FaultTimeout:
		return nil, timeoutError{}, true
	}
	resp, err := i.next.RoundTrip(req)
	if err != nil || fault != FaultTruncated || resp.StatusCode/100 != 2 {
		return resp, err, false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err, false
	}
	if len(body) < 2 {
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return resp, nil, false // nothing to cut
	}
	body = body[:len(body)/2]
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil, true
}

func synthetic(req *http.Request, status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
}

// timeoutError is what a dial or read deadline returns.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// Redact replaces every secret in s.
func Redact(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[REDACTED]")
		}
	}
	return s
}
