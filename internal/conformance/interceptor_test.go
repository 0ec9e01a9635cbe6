package conformance

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

type cloudFunc func(*http.Request) (*http.Response, error)

func (f cloudFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInterceptor: each fault replaces exactly the armed request, in the
// way the host reports it to the module, and the log redacts secrets.
func TestInterceptor(t *testing.T) {
	cloud := cloudFunc(func(r *http.Request) (*http.Response, error) {
		status, body := 200, `{"id":"i-1","name":"node-1"}`
		if r.Method == "DELETE" {
			status, body = 404, `{"error":"no such instance"}`
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
	})
	tests := []struct {
		fault      Fault
		method     string
		status     int
		body       string
		retryAfter string
		err        string
		injected   bool
	}{
		{fault: Fault500, method: "GET", status: 500, body: "injected", injected: true},
		{fault: Fault429, method: "GET", status: 429, retryAfter: "7", injected: true},
		{fault: Fault401, method: "GET", status: 401, injected: true},
		{fault: FaultReset, method: "GET", err: "connection reset by peer", injected: true},
		{fault: FaultTimeout, method: "GET", err: "i/o timeout", injected: true},
		{fault: FaultTruncated, method: "GET", status: 200, body: `{"id":"i-1",`, injected: true},
		// Only a success is cut: a 404's status is the cloud's own answer.
		{fault: FaultTruncated, method: "DELETE", status: 404, body: `{"error":"no such instance"}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault)+" "+tt.method, func(t *testing.T) {
			ic := NewInterceptor([]string{"s3cret"})
			rt := ic.Wrap(cloud)
			send := func() (*http.Response, error) {
				req, _ := http.NewRequest(tt.method, "http://cloud.example/v1/instances/i-1?token=s3cret", nil)
				return rt.RoundTrip(req)
			}
			ic.Arm(tt.fault, 1)
			if resp, err := send(); err != nil || resp.StatusCode != 200 && tt.method == "GET" {
				t.Fatalf("request 0 was not the cloud's: %v %v", resp, err)
			}
			resp, err := send()
			if injected := ic.Disarm(); injected != tt.injected {
				t.Errorf("injected = %v, want %v", injected, tt.injected)
			}
			if tt.err != "" {
				var netErr net.Error
				if err == nil || !strings.Contains(err.Error(), tt.err) || tt.fault == FaultTimeout && !(errors.As(err, &netErr) && netErr.Timeout()) {
					t.Fatalf("got %v, %v; want error %q", resp, err, tt.err)
				}
			} else {
				body, _ := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) || resp.Header.Get("Retry-After") != tt.retryAfter {
					t.Fatalf("got %v %d %q Retry-After %q; want %d %q %q", err, resp.StatusCode, body, resp.Header.Get("Retry-After"), tt.status, tt.body, tt.retryAfter)
				}
			}
			log := ic.Since(0)
			if len(log) != 2 || (log[1].Injected != "") != tt.injected || log[0].Injected != "" {
				t.Fatalf("log %+v", log)
			}
			if !log[1].secretInURL || strings.Contains(log[1].String(), "s3cret") || !strings.Contains(log[1].URL, "token=[REDACTED]") {
				t.Errorf("log entry %q: secret not redacted or not flagged", log[1])
			}
		})
	}
}
