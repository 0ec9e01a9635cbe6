// Package rest calls a cloud's HTTP/JSON API through the module's Host: it
// builds requests (method, URL and query, JSON body, the credential the
// host authenticates them with, per-request timeout), decodes JSON
// responses and maps status codes to the errors the host understands.
//
// It uses neither net/http nor net/url nor fmt, so it costs the same under
// TinyGo, whose net/http does not work here, as under standard Go.
//
// The status mapping is the one that keeps clusters safe:
//
//   - 2xx, and any status the request lists in Accept, is returned as a
//     response.
//   - 404 becomes an error wrapping sdk.ErrNotFound only when the request
//     says that a 404 means "does not exist" (NotFound), and the Client's
//     Absent judges the response definitive. Every other 404 is a plain
//     error: a wrong path or a proxy must never read as "gone".
//   - 429, and 503 with a Retry-After header, become sdk.RetryAfter, as
//     does any error response the Client's RetryLater judges passing.
//   - Everything else, 5xx included, is an error naming the request and the
//     cloud's answer.
//
// A transport failure (no response at all: timeout, reset, refused) is an
// error as well, never "not found".
package rest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Client reaches one API. Set its fields once, in the provider's Init.
type Client struct {
	// Host carries the requests.
	Host sdk.Host
	// Name prefixes every error and log line, e.g. "mycloud".
	Name string
	// BaseURL is the API's scheme://host[:port][/prefix], without a
	// trailing slash; request paths are appended to it.
	BaseURL string
	// Credential names the credential the host authenticates every
	// request with (abi.HeaderCredential): an entry of the cloud-config's
	// credentials.auth, which says how (bearer token, SigV4, OAuth2...)
	// and for which origins. The module never reads the secret; the host
	// reads it at send time, so a rotated Secret takes effect at once.
	// "" sends requests unauthenticated.
	Credential string
	// Timeout bounds each request, below the host's own limit and the
	// context's deadline; 0 leaves only those.
	Timeout time.Duration
	// Absent judges whether a 404 answering a NotFound request proves that
	// the object does not exist, e.g. by checking the API's own error body.
	// nil accepts every 404.
	Absent func(resp *abi.HTTPResponse) bool
	// ErrorMessage extracts the API's message from an error response; nil
	// quotes the start of the body.
	ErrorMessage func(resp *abi.HTTPResponse) string
	// RetryLater judges whether an error response reports a passing state
	// of the API, such as a resource locked by another operation, and after
	// how long to ask again: it then becomes sdk.RetryAfter, which the
	// controllers honour, rather than an error they back off from. nil
	// leaves such responses errors.
	RetryLater func(resp *abi.HTTPResponse) (time.Duration, bool)
}

// Param is one query parameter.
type Param struct{ Name, Value string }

// Request is one API call.
type Request struct {
	// What says what the call is for, as errors report it: "getting
	// instance i-1".
	What   string
	Method string
	// Path is appended to BaseURL; escape its variable parts with
	// PathEscape.
	Path  string
	Query []Param
	// Body is the JSON request body, if any.
	Body []byte
	// Form, if set, is the body instead, form-encoded
	// (application/x-www-form-urlencoded): a query API's Action and
	// parameters, POST / with Action=DescribeInstances&InstanceId.1=i-1.
	// The answer is decoded as JSON all the same.
	Form []Param
	// NotFound says that a 404 means the object does not exist: it is then
	// returned as an error wrapping sdk.ErrNotFound.
	NotFound bool
	// Accept lists statuses besides 2xx that the caller handles itself,
	// e.g. 409 for a create that may conflict; they are returned as
	// responses.
	Accept []int32
	// Into, if set, receives the decoded JSON body of a 2xx response. A
	// value implementing json.Unmarshaler is handed the body directly.
	Into any
}

// Do performs req and maps its outcome as the package documentation says.
// On success it returns the response, its body already decoded into
// req.Into.
func (c *Client) Do(ctx context.Context, req *Request) (*abi.HTTPResponse, error) {
	resp, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if !ok {
		for _, s := range req.Accept {
			if resp.StatusCode == s {
				return resp, nil
			}
		}
		return nil, c.Error(req, resp)
	}
	if req.Into != nil {
		if err := c.decode(req, resp); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// Error turns a response the caller did not expect into an error, mapped
// as Do maps it. Callers use it for a status they accepted and then could
// not handle.
func (c *Client) Error(req *Request, resp *abi.HTTPResponse) error {
	e := &StatusError{prefix: c.prefix(req), StatusCode: resp.StatusCode, Message: c.message(resp)}
	switch {
	case resp.StatusCode == 404 && req.NotFound && (c.Absent == nil || c.Absent(resp)):
		e.notFound = true
	case resp.StatusCode == 401:
		e.Message += " (check the credential " + strconv.Quote(c.Credential) + " in the cloud-config's credentials.auth and its Secret)"
	case resp.StatusCode == 429 || resp.StatusCode == 503:
		after, ok := RetryAfterHeader(resp.Header("Retry-After"))
		if !ok && resp.StatusCode == 429 {
			after, ok = time.Second, true
		}
		if ok {
			return sdk.RetryAfter(after, e.Error()) // the host adds the delay to the message
		}
	}
	if c.RetryLater != nil && !e.notFound {
		if after, ok := c.RetryLater(resp); ok {
			return sdk.RetryAfter(after, e.Error())
		}
	}
	return e
}

// StatusError is an HTTP status the caller did not expect. It wraps
// sdk.ErrNotFound when it is a definitive 404 of a NotFound request.
type StatusError struct {
	prefix     string
	StatusCode int32
	// Message is the API's explanation, from Client.ErrorMessage.
	Message  string
	notFound bool
}

func (e *StatusError) Error() string {
	return e.prefix + ": cloud answered " + strconv.Itoa(int(e.StatusCode)) + ": " + e.Message
}

// Unwrap makes a definitive 404 match sdk.ErrNotFound.
func (e *StatusError) Unwrap() error {
	if e.notFound {
		return sdk.ErrNotFound
	}
	return nil
}

// prefix is how every error of req starts: "mycloud: getting instance
// i-1: GET /v1/instances/i-1".
func (c *Client) prefix(req *Request) string {
	return c.Name + ": " + req.What + ": " + req.Method + " " + req.target()
}

// send builds and performs the request; an error means no response.
func (c *Client) send(ctx context.Context, req *Request) (*abi.HTTPResponse, error) {
	fail := func(msg string) error { return errors.New(c.Name + ": " + req.What + ": " + msg) }
	if c.BaseURL == "" {
		return nil, fail("the client is not initialized: it has no base URL")
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(err.Error())
	}
	target := req.target()
	hreq := &abi.HTTPRequest{Method: req.Method, URL: c.BaseURL + target, Body: req.Body}
	hreq.Headers = append(make([]abi.Header, 0, 3), abi.Header{Name: "Accept", Value: "application/json"})
	switch {
	case req.Form != nil:
		hreq.Body = appendParams(nil, req.Form)
		hreq.Headers = append(hreq.Headers, abi.Header{Name: "Content-Type", Value: "application/x-www-form-urlencoded"})
	case req.Body != nil:
		hreq.Headers = append(hreq.Headers, abi.Header{Name: "Content-Type", Value: "application/json"})
	}
	if c.Credential != "" {
		hreq.Headers = append(hreq.Headers, abi.Header{Name: abi.HeaderCredential, Value: c.Credential})
	}
	hreq.TimeoutMillis = TimeoutMillis(ctx, c.Timeout)
	debug := c.Host.LogEnabled(abi.LogDebug)
	var start time.Time
	if debug {
		start = time.Now()
	}
	resp, err := c.Host.HTTP(hreq)
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error) // hosts report a missing response either way
	}
	if err != nil {
		if debug {
			c.Host.Log(abi.LogDebug, c.Name+": "+req.Method+" "+target+" failed after "+time.Since(start).String()+": "+err.Error())
		}
		return nil, fail(req.Method + " " + target + ": no response: " + err.Error())
	}
	if debug {
		c.Host.Log(abi.LogDebug, c.Name+": "+req.Method+" "+target+" -> "+strconv.Itoa(int(resp.StatusCode))+" in "+time.Since(start).String())
	}
	return resp, nil
}

// TimeoutMillis is abi.HTTPRequest.TimeoutMillis for a request bounded
// by limit (0: none) and by ctx's deadline, whichever ends first; 0 when
// neither bounds it. Clients other than Client (a Query-protocol or XML
// API, say) use it to give the host the same bound.
func TimeoutMillis(ctx context.Context, limit time.Duration) uint32 {
	timeout := limit
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); timeout == 0 || left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	if timeout <= 0 {
		return 0
	}
	return uint32(min(timeout.Milliseconds(), int64(^uint32(0))))
}

// target is the request's path and query, as errors and logs show it.
func (r *Request) target() string {
	if len(r.Query) == 0 {
		return r.Path
	}
	var buf [128]byte // on the stack for all but long URLs
	b := append(buf[:0], r.Path...)
	b = append(b, '?')
	return string(appendParams(b, r.Query))
}

// appendParams appends params, escaped, as a query string or a form body
// encodes them: name=value joined by &.
func appendParams(b []byte, params []Param) []byte {
	for i, p := range params {
		if i > 0 {
			b = append(b, '&')
		}
		b = appendEscaped(b, p.Name)
		b = append(b, '=')
		b = appendEscaped(b, p.Value)
	}
	return b
}

func (c *Client) decode(req *Request, resp *abi.HTTPResponse) error {
	var err error
	if u, ok := req.Into.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(resp.Body)
	} else {
		err = json.Unmarshal(resp.Body, req.Into)
	}
	if err != nil {
		return errors.New(c.prefix(req) + ": decoding the cloud's " + strconv.Itoa(int(resp.StatusCode)) + " response: " + err.Error())
	}
	return nil
}

func (c *Client) message(resp *abi.HTTPResponse) string {
	if c.ErrorMessage != nil {
		if msg := c.ErrorMessage(resp); msg != "" {
			return msg
		}
	}
	return Excerpt(resp.Body)
}

// Excerpt describes a body for an error message: its first 200 bytes, with
// anything unprintable replaced, so that a binary or HTML page cannot
// garble a log.
func Excerpt(body []byte) string {
	i, j := 0, len(body)
	for i < j && isSpace(body[i]) {
		i++
	}
	for j > i && isSpace(body[j-1]) {
		j--
	}
	body = body[i:j]
	if len(body) == 0 {
		return "(empty body)"
	}
	if len(body) > 200 {
		body = body[:200]
	}
	out := make([]byte, 0, len(body))
	for _, c := range body {
		if c < 0x20 || c >= 0x7f {
			c = '?'
		}
		out = append(out, c)
	}
	return "unexpected body " + strconv.Quote(string(out))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// maxRetryAfter bounds a server-requested delay.
const maxRetryAfter = time.Hour

// Member decodes the member key of a JSON object into v: the envelope
// many cloud APIs wrap their answers in ({"server": {...}, "meta": ...}),
// decoded first into a map of raw members. A missing or null member is an
// error, never a zero value, since an empty answer read as "nothing" can
// make an object look gone.
func Member(body map[string]json.RawMessage, key string, v any) error {
	raw, ok := body[key]
	if !ok || string(raw) == "null" {
		return errors.New("the response has no " + strconv.Quote(key))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errors.New("decoding " + strconv.Quote(key) + ": " + err.Error())
	}
	return nil
}

// RetryAfterHeader parses a Retry-After value, delay-seconds or an HTTP
// date (abi.ParseRetryAfter), into a delay between one second and one
// hour.
func RetryAfterHeader(v string) (time.Duration, bool) {
	d, ok := abi.ParseRetryAfter(v, time.Now())
	if !ok {
		return 0, false
	}
	return min(max(d, time.Second), maxRetryAfter), true
}

// PathEscape percent-encodes s for use as one path segment (or query
// value): everything but RFC 3986's unreserved characters is escaped.
func PathEscape(s string) string {
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			return string(appendEscaped(make([]byte, 0, len(s)+8), s))
		}
	}
	return s
}

func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
