// Package hosthttp offers an http.RoundTripper over the host's HTTP
// function, so that ordinary net/http client code, including generated
// cloud API clients, runs unchanged inside a standard Go module. TinyGo
// modules, whose net/http support is partial, use package sdk/rest (or
// sdk.Host.HTTP directly), which works the same under both toolchains.
package hosthttp

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Transport sends requests through Host.
type Transport struct {
	Host sdk.Host
}

// NewClient returns an http.Client over the module's host imports. Redirects
// are followed by the client, and every hop is checked against the
// allowlist by the host.
func NewClient() *http.Client { return &http.Client{Transport: &Transport{Host: sdk.Imports()}} }

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	areq := &abi.HTTPRequest{Method: req.Method, URL: req.URL.String()}
	for name, values := range req.Header {
		for _, v := range values {
			areq.Headers = append(areq.Headers, abi.Header{Name: name, Value: v})
		}
	}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		areq.Body = body
	}
	if deadline, ok := req.Context().Deadline(); ok {
		if ms := time.Until(deadline).Milliseconds(); ms > 0 {
			areq.TimeoutMillis = uint32(min(ms, int64(^uint32(0))))
		}
	}
	aresp, err := t.Host.HTTP(areq)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{
		StatusCode:    int(aresp.StatusCode),
		Status:        http.StatusText(int(aresp.StatusCode)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(aresp.Headers)),
		Body:          io.NopCloser(bytes.NewReader(aresp.Body)),
		ContentLength: int64(len(aresp.Body)),
		Request:       req,
	}
	for _, h := range aresp.Headers {
		resp.Header.Add(h.Name, h.Value)
	}
	return resp, nil
}
