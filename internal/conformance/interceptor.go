package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
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
	Fault403       Fault = "403"
	Fault400       Fault = "400"
)

// Faults is every fault, in the order the suite injects them. Each is
// injected into every request of a call in turn, the second and later
// ones too: into page 2 of a listing, or into the DELETE after a lookup.
// No fault says "not found": a 404 is the one answer a module may take as
// the cloud's word that something is gone, so the suite never forges it.
var Faults = []Fault{Fault500, Fault429, FaultReset, FaultTimeout, FaultTruncated, Fault401, Fault403, Fault400}

// DefaultRate is the pace, in requests per second, at which the suite
// sends requests to the cloud unless told otherwise: one that staging APIs
// tolerate (Hetzner allows 3,600 an hour in bursts, most clouds 10 to 20 a
// second per token).
const DefaultRate = 10

// maxCloudWait bounds how long the interceptor waits out one 429 of the
// cloud's own before it lets the module see it.
const maxCloudWait = 60 * time.Second

// maxBodyShown bounds the bytes of a request or response body a failure
// report shows.
const maxBodyShown = 1024

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
	// RequestBody and ResponseBody are the bodies, credentials redacted
	// and cut to maxBodyShown bytes, for the failure report.
	RequestBody, ResponseBody string
	// Form is the whole request body of a form-encoded request (a query
	// API's), parsed, credentials redacted: the judges read the Action
	// and the names in it.
	Form url.Values
	// CloudThrottled records that the cloud itself (not the suite)
	// answered 429 and the module saw it: the interceptor could not wait
	// it out within the call's deadline.
	CloudThrottled bool
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
	if e.CloudThrottled {
		answer += " [the cloud's own rate limit]"
	}
	action := ""
	if a := queryAction(e); a != "" {
		action = " (Action=" + a + ")"
	}
	return fmt.Sprintf("%s %s%s -> %s in %s", e.Method, e.URL, action, answer, e.Duration.Round(time.Microsecond))
}

// Bodies returns the exchange's request and response bodies as report
// lines, "" when both are empty.
func (e Exchange) Bodies() []string {
	var lines []string
	if e.RequestBody != "" {
		lines = append(lines, "  request body:  "+e.RequestBody)
	}
	if e.ResponseBody != "" {
		lines = append(lines, "  response body: "+e.ResponseBody)
	}
	return lines
}

// Throttling is what the cloud's own rate limit cost a run.
type Throttling struct {
	// Count is how many 429s the cloud answered; Waited how long the
	// suite waited them out; Passed how many reached the module because
	// waiting would have outlasted its call's deadline.
	Count  int
	Waited time.Duration
	Passed int
}

// Interceptor sits in the host's HTTP layer (egress.Config.Wrap): it
// records every request and, when armed, injects a fault into one of them.
type Interceptor struct {
	next    http.RoundTripper
	secrets *credentials.SecretSet

	mu       sync.Mutex
	log      []Exchange
	fault    Fault
	target   int // index, counted from arming, of the request to fault
	seen     int
	injected bool

	// interval spaces the requests sent to the cloud; nextAt is when
	// the next one may go.
	interval  time.Duration
	nextAt    time.Time
	throttled Throttling
	// sent counts the requests sent to the cloud; past limit (when
	// positive) none is sent and capped is set.
	sent, limit int
	capped      bool
}

// ErrRequestCap answers a request the run's cap on requests withheld.
var ErrRequestCap = errors.New("not sent: the run reached its cap on requests to the cloud (wasmccm test -max-requests)")

// SetMaxRequests caps the requests sent to the cloud at n; 0 or less
// sends them all.
func (i *Interceptor) SetMaxRequests(n int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.limit = n
}

// Sent reports how many requests reached the cloud, and whether the cap
// withheld any.
func (i *Interceptor) Sent() (int, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.sent, i.capped
}

// SetRate paces the requests the interceptor sends to the cloud at rate
// per second; 0 or less sends them at once. Injected faults reach no cloud
// and are not paced.
func (i *Interceptor) SetRate(rate float64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.interval = 0
	if rate > 0 {
		i.interval = time.Duration(float64(time.Second) / rate)
	}
}

// Throttled reports what the cloud's own 429s cost so far.
func (i *Interceptor) Throttled() Throttling {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.throttled
}

// pace waits for the request's turn.
func (i *Interceptor) pace(req *http.Request) error {
	i.mu.Lock()
	now := time.Now()
	at := i.nextAt
	if at.Before(now) {
		at = now
	}
	i.nextAt = at.Add(i.interval)
	i.mu.Unlock()
	return sleep(req, at.Sub(now))
}

func sleep(req *http.Request, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-req.Context().Done():
		return req.Context().Err()
	}
}

// NewInterceptor returns an interceptor that redacts the secrets from
// what it records, in every form the host searches answers for. Wrap it
// around a transport with Wrap.
func NewInterceptor(secrets []string) *Interceptor {
	return &Interceptor{secrets: credentials.NewSecretSet(secrets...), target: -1}
}

// Redact returns s with the interceptor's secrets overwritten.
func (i *Interceptor) Redact(s string) string { return i.secrets.Redact(s) }

// Wrap is the egress.Config.Wrap hook.
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

// armed reports whether a fault is armed: the call now running is a
// faulted one.
func (i *Interceptor) armed() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.target >= 0
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
	reqBody := peekRequest(req)
	resp, err, injected := i.roundTrip(req, fault)
	raw := req.URL.String()
	ex := Exchange{Method: req.Method, URL: i.Redact(raw), Duration: time.Since(start),
		RequestBody: i.shown(reqBody)}
	if ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		ex.Form, _ = url.ParseQuery(i.Redact(string(reqBody)))
	}
	ex.secretInURL = ex.URL != raw // Redact returns raw itself when it holds no secret
	if injected {
		ex.Injected = fault
	}
	if err != nil {
		ex.Err = err.Error()
	} else {
		ex.Status = resp.StatusCode
		ex.BodySize = int(resp.ContentLength)
		ex.ResponseBody = i.shown(peekResponse(resp))
		ex.CloudThrottled = !injected && resp.StatusCode == http.StatusTooManyRequests
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
	case Fault403:
		return synthetic(req, 403, nil, `{"error":"forbidden (injected by wasmccm test)"}`), nil, true
	case Fault400:
		return synthetic(req, 400, nil, `{"error":"bad request (injected by wasmccm test)"}`), nil, true
	case FaultReset:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true
	case FaultTimeout:
		return nil, timeoutError{}, true
	}
	resp, err := i.send(req)
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

// send sends req to the cloud at the run's pace, and waits out the
// cloud's own 429s with their Retry-After, resending the request, as long
// as the wait ends before the call's deadline: the cloud's rate limit is
// the run's pace being too fast, not the module's fault. A 429 it cannot
// wait out reaches the module, marked CloudThrottled in the log.
func (i *Interceptor) send(req *http.Request) (*http.Response, error) {
	for {
		if err := i.pace(req); err != nil {
			return nil, err
		}
		i.mu.Lock()
		capped := i.limit > 0 && i.sent >= i.limit
		i.capped = i.capped || capped
		if !capped {
			i.sent++
		}
		i.mu.Unlock()
		if capped {
			return nil, ErrRequestCap
		}
		resp, err := i.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		wait := retryAfter(resp.Header.Get("Retry-After"))
		i.mu.Lock()
		i.throttled.Count++
		i.mu.Unlock()
		deadline, ok := req.Context().Deadline()
		replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
		if wait > maxCloudWait || !replayable || ok && time.Until(deadline) < wait+time.Second {
			i.mu.Lock()
			i.throttled.Passed++
			i.mu.Unlock()
			return resp, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err := sleep(req, wait); err != nil {
			return nil, err
		}
		i.mu.Lock()
		i.throttled.Waited += wait
		// The whole origin waits: the next request goes no sooner.
		if now := time.Now(); i.nextAt.Before(now) {
			i.nextAt = now
		}
		i.mu.Unlock()
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}

// retryAfter reads a Retry-After header, in seconds or as a date; one
// second when it says nothing usable.
func retryAfter(v string) time.Duration {
	if d, ok := abi.ParseRetryAfter(v, time.Now()); ok {
		return max(d, 100*time.Millisecond)
	}
	return time.Second
}

// peekRequest returns the request's body and leaves it readable.
func peekRequest(req *http.Request) []byte {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			return b
		}
	}
	b, _ := io.ReadAll(req.Body)
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b
}

// peekResponse reads the response's body and leaves it readable as it
// was, its length unchanged.
func peekResponse(resp *http.Response) []byte {
	if resp.Body == nil {
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		return b
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// shown is a body as a report shows it: credentials redacted, cut.
func (i *Interceptor) shown(b []byte) string {
	s := i.Redact(string(b))
	if len(s) > maxBodyShown {
		s = s[:maxBodyShown] + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return strings.TrimSpace(s)
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
