package conformance

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
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
			ic := NewInterceptor([]string{"s3cret-value"})
			rt := ic.Wrap(cloud)
			send := func() (*http.Response, error) {
				req, _ := http.NewRequest(tt.method, "http://cloud.example/v1/instances/i-1?token=s3cret-value", nil)
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
			if !log[1].secretInURL || strings.Contains(log[1].String(), "s3cret-value") || !strings.Contains(log[1].URL, "token=************") {
				t.Errorf("log entry %q: secret not redacted or not flagged", log[1])
			}
		})
	}
}

// TestInterceptorClientErrors: 403 and 400 are injected like 401.
func TestInterceptorClientErrors(t *testing.T) {
	for _, f := range []Fault{Fault403, Fault400} {
		ic := NewInterceptor(nil)
		rt := ic.Wrap(cloudFunc(func(r *http.Request) (*http.Response, error) {
			t.Fatal("an injected fault reached the cloud")
			return nil, nil
		}))
		ic.Arm(f, 0)
		req, _ := http.NewRequest("GET", "http://cloud.example/v1/instances", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil || strconv.Itoa(resp.StatusCode) != string(f) || !ic.Disarm() {
			t.Fatalf("%s: got %v, %v", f, resp, err)
		}
	}
}

// TestInterceptorBodies: the log keeps both bodies, credentials redacted,
// and the module still reads them whole.
func TestInterceptorBodies(t *testing.T) {
	ic := NewInterceptor([]string{"s3cret-value"})
	rt := ic.Wrap(cloudFunc(func(r *http.Request) (*http.Response, error) {
		in, _ := io.ReadAll(r.Body)
		body := `{"echo":` + string(in) + `,"token":"s3cret-value"}`
		return &http.Response{StatusCode: 201, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
	}))
	req, _ := http.NewRequest("POST", "http://cloud.example/v1/lbs", strings.NewReader(`{"name":"lb","key":"s3cret-value"}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if string(got) != `{"echo":{"name":"lb","key":"s3cret-value"},"token":"s3cret-value"}` {
		t.Fatalf("the module read %q", got)
	}
	ex := ic.Since(0)[0]
	if ex.RequestBody != `{"name":"lb","key":"************"}` || ex.ResponseBody != `{"echo":{"name":"lb","key":"************"},"token":"************"}` {
		t.Fatalf("bodies %q %q", ex.RequestBody, ex.ResponseBody)
	}
}

// TestInterceptorPacing: requests to the cloud go at the set rate;
// injected faults are not held back.
func TestInterceptorPacing(t *testing.T) {
	ic := NewInterceptor(nil)
	ic.SetRate(50)
	rt := ic.Wrap(cloudFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	}))
	start := time.Now()
	for range 6 {
		req, _ := http.NewRequest("GET", "http://cloud.example/", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("6 requests at 50/s took %s, want at least 100ms", d)
	}
}

// TestInterceptorWaitsOutCloud429: a 429 of the cloud's own is waited out
// with its Retry-After and the request sent again, the body too, and
// counted; one the call's deadline cannot wait for reaches the module,
// marked.
func TestInterceptorWaitsOutCloud429(t *testing.T) {
	var calls int
	ic := NewInterceptor(nil)
	rt := ic.Wrap(cloudFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		body, _ := io.ReadAll(r.Body)
		if string(body) != `{"a":1}` {
			t.Errorf("request %d sent body %q", calls, body)
		}
		if calls == 1 || r.Header.Get("X-Long") != "" {
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	}))
	req, _ := http.NewRequest("POST", "http://cloud.example/", strings.NewReader(`{"a":1}`))
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 || calls != 2 || time.Since(start) < time.Second {
		t.Fatalf("got %v %v after %d calls in %s", resp, err, calls, time.Since(start))
	}
	if th := ic.Throttled(); th.Count != 1 || th.Waited != time.Second || th.Passed != 0 {
		t.Fatalf("throttling %+v", th)
	}
	if ic.Since(0)[0].CloudThrottled {
		t.Error("a 429 waited out is marked as reaching the module")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "POST", "http://cloud.example/", strings.NewReader(`{"a":1}`))
	req.Header.Set("X-Long", "1")
	resp, err = rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 429 || !ic.Since(0)[1].CloudThrottled || ic.Throttled().Passed != 1 {
		t.Fatalf("got %v %v, log %+v", resp, err, ic.Since(0))
	}
}

// TestInterceptorMaxRequests: past the cap no request reaches the cloud;
// injected faults, which reach none, are not counted.
func TestInterceptorMaxRequests(t *testing.T) {
	reached := 0
	cloud := cloudFunc(func(r *http.Request) (*http.Response, error) {
		reached++
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), ContentLength: 2}, nil
	})
	ic := NewInterceptor(nil)
	ic.SetMaxRequests(2)
	rt := ic.Wrap(cloud)
	send := func() error {
		req, _ := http.NewRequest("GET", "http://cloud.example/v1/instances", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	ic.Arm(Fault500, 0)
	if err := send(); err != nil {
		t.Fatal(err)
	}
	ic.Disarm()
	for i := range 2 {
		if err := send(); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if sent, capped := ic.Sent(); sent != 2 || capped {
		t.Fatalf("sent %d, capped %v before the cap; want 2, false", sent, capped)
	}
	if err := send(); !errors.Is(err, ErrRequestCap) {
		t.Fatalf("past the cap: %v, want ErrRequestCap", err)
	}
	if sent, capped := ic.Sent(); sent != 2 || !capped || reached != 2 {
		t.Fatalf("sent %d, capped %v, the cloud saw %d; want 2, true, 2", sent, capped, reached)
	}
}

// TestInterceptorForm: a form-encoded request's body is kept parsed, its
// secrets redacted, and the exchange shows its Action.
func TestInterceptorForm(t *testing.T) {
	cloud := cloudFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 404, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("<Error/>")), ContentLength: 8}, nil
	})
	ic := NewInterceptor([]string{"s3cret-value"})
	rt := ic.Wrap(cloud)
	for _, ct := range []string{"application/x-www-form-urlencoded; charset=utf-8", "application/json"} {
		req, _ := http.NewRequest("POST", "http://cloud.example/", strings.NewReader("Action=DescribeInstances&InstanceId.1=i-1&Signature=s3cret-value"))
		req.Header.Set("Content-Type", ct)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	log := ic.Since(0)
	if f := log[0].Form; f.Get("Action") != "DescribeInstances" || f.Get("InstanceId.1") != "i-1" || f.Get("Signature") != "************" {
		t.Errorf("form %v", f)
	}
	if s := log[0].String(); !strings.HasPrefix(s, "POST http://cloud.example/ (Action=DescribeInstances) -> 404 (8 bytes)") {
		t.Errorf("String() = %q", s)
	}
	// Not a form, but written as query APIs write one: still read so.
	if log[1].Form != nil || queryAction(log[1]) != "DescribeInstances" {
		t.Errorf("JSON request: form %v, action %q", log[1].Form, queryAction(log[1]))
	}
}
