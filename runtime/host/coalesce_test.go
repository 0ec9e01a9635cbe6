package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// TestCoalescedReads: identical concurrent reads reach the cloud once;
// a read that may have missed a write that finished before it, a read
// that opts out, and any write go on their own.
func TestCoalescedReads(t *testing.T) {
	var gets, posts atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			return
		}
		gets.Add(1)
		<-release
		w.Write([]byte("listing"))
	}))
	defer srv.Close()
	h, err := newHTTPClient("t", HTTPConfig{AllowedOrigins: []string{srv.URL}, Timeout: 5 * time.Second, MaxResponseBytes: 1 << 20, MaxRequestBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	get := func(headers ...abi.Header) *abi.HTTPRequest {
		return &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers", Headers: headers}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	bodies := make([]string, 4)
	for i := range bodies {
		wg.Go(func() { bodies[i] = string(h.do(ctx, get()).Body) })
	}
	waitFor(t, func() bool { return gets.Load() == 1 })
	time.Sleep(50 * time.Millisecond) // the other three join meanwhile
	if gets.Load() != 1 {
		t.Errorf("%d GETs reached the cloud, want 1", gets.Load())
	}

	// A write finishes while the first read is still in flight: a read
	// after it must not take the older answer.
	if resp := h.do(ctx, &abi.HTTPRequest{Method: "POST", URL: srv.URL + "/servers"}); resp.Error != "" || posts.Load() != 1 {
		t.Fatalf("POST: %+v", resp)
	}
	wg.Go(func() { h.do(ctx, get()) })
	waitFor(t, func() bool { return gets.Load() == 2 })
	wg.Go(func() { h.do(ctx, get(abi.Header{Name: "Cache-Control", Value: "no-cache"})) })
	waitFor(t, func() bool { return gets.Load() == 3 })
	close(release)
	wg.Wait()
	for i, b := range bodies {
		if b != "listing" {
			t.Errorf("reader %d got %q", i, b)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
