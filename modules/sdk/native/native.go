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
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Host implements sdk.Host with net/http and an in-memory credential map.
// Unlike the wasm host it enforces no allowlist: native code is trusted.
type Host struct {
	// Transport carries HTTP requests; nil means http.DefaultTransport.
	// Requests that name a credential (abi.HeaderCredential) need one that
	// applies it as the wasm host does, such as runtime/credentials'
	// NewTransport; http.DefaultTransport sends them unauthenticated.
	Transport http.RoundTripper
	// Credentials maps the names Credential serves to their values.
	Credentials map[string]string
	// Logger receives Log calls; nil discards them.
	Logger *log.Logger
	// Timeout bounds each request; 0 means 10 seconds.
	Timeout time.Duration

	// state is the shared state, in process memory and unbounded: native
	// code is trusted. A claim never makes another caller wait, so each
	// caller that finds no value fills it, which is correct, only not
	// coalesced as in the host.
	mu    sync.Mutex
	state map[string]stateEntry
}

type stateEntry struct {
	value   []byte
	written time.Time
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

// StateGet returns key's value when it is at most maxAge old.
func (h *Host) StateGet(key string, maxAge time.Duration, _ bool) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.state[key]
	if !ok || maxAge >= 0 && time.Since(e.written) > maxAge {
		return nil, false
	}
	return e.value, true
}

// StateSet stores a copy of value under key.
func (h *Host) StateSet(key string, value []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == nil {
		h.state = map[string]stateEntry{}
	}
	h.state[key] = stateEntry{value: append([]byte(nil), value...), written: time.Now()}
	return nil
}

// StateDelete removes key.
func (h *Host) StateDelete(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.state, key)
}
