// Package native provides an sdk.Host for running provider code natively,
// in-process: in the provider author's unit tests, and in benchmarks that
// compare a provider compiled into the host with the same provider in a
// module. It is never linked into a module.
package native

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Host implements sdk.Host with net/http and an in-memory credential map.
// Unlike the wasm host it enforces no allowlist: native code is trusted.
type Host struct {
	// Transport carries HTTP requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Credentials maps credential names to values.
	Credentials map[string]string
	// Logger receives Log calls; nil discards them.
	Logger *log.Logger
	// Timeout bounds each request; 0 means 10 seconds.
	Timeout time.Duration
}

var _ sdk.Host = (*Host)(nil)

// HTTP performs req with Transport, returning the whole response.
func (h *Host) HTTP(req *abi.HTTPRequest) (*abi.HTTPResponse, error) {
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if req.TimeoutMillis > 0 && time.Duration(req.TimeoutMillis)*time.Millisecond < timeout {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, &sdk.HTTPError{Msg: err.Error()}
	}
	for _, hd := range req.Headers {
		hreq.Header.Add(hd.Name, hd.Value)
	}
	rt := h.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(hreq)
	if err != nil {
		return nil, &sdk.HTTPError{Msg: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &sdk.HTTPError{Msg: err.Error()}
	}
	out := &abi.HTTPResponse{StatusCode: int32(resp.StatusCode), Body: body}
	for name, values := range resp.Header {
		for _, v := range values {
			out.Headers = append(out.Headers, abi.Header{Name: name, Value: v})
		}
	}
	return out, nil
}

// Credential looks name up in Credentials.
func (h *Host) Credential(name string) (string, error) {
	v, ok := h.Credentials[name]
	if !ok {
		return "", &sdk.CredentialError{Name: name, Errno: abi.ErrnoNotGranted}
	}
	return v, nil
}

// Log prints msg with its level to Logger.
func (h *Host) Log(level abi.LogLevel, msg string) {
	if h.Logger != nil {
		h.Logger.Printf("[%d] %s", level, msg)
	}
}

// LogEnabled reports whether a Logger is set.
func (h *Host) LogEnabled(abi.LogLevel) bool { return h.Logger != nil }
