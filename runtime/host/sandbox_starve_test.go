package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// TestCoalescingConfusion: a request crafted so that its fields, joined
// with the old key's separators, read as another request's does not share
// that request's response while both are in flight. The crafted one puts
// the separator in a header value; the host refuses it, and the request it
// imitates gets the cloud's answer to itself.
func TestCoalescingConfusion(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Write([]byte("answer to " + r.Header.Get("X-Tenant") + "/" + r.Header.Get("X-Role")))
	}))
	defer srv.Close()
	defer close(release)
	h, err := newHTTPClient("t", Config{HTTP: HTTPConfig{AllowedOrigins: []string{srv.URL}}}.withDefaults().HTTP)
	if err != nil {
		t.Fatal(err)
	}
	genuine := &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers",
		Headers: []abi.Header{{Name: "X-Tenant", Value: "a"}, {Name: "X-Role", Value: "admin"}}}
	crafted := &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers",
		Headers: []abi.Header{{Name: "X-Tenant", Value: "a\x00X-Role\x00admin"}}}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	genuineResp := make(chan *abi.HTTPResponse, 1)
	go func() { genuineResp <- h.do(ctx, genuine) }()
	<-arrived
	craftedResp := make(chan *abi.HTTPResponse, 1)
	go func() { craftedResp <- h.do(ctx, crafted) }()
	var got *abi.HTTPResponse
	select {
	case got = <-craftedResp:
	case <-time.After(time.Second):
		// It joined the genuine request's flight: let that one finish.
	}
	release <- struct{}{}
	if got == nil {
		got = <-craftedResp
	}
	want := <-genuineResp
	if want.StatusCode != http.StatusOK || string(want.Body) != "answer to a/admin" {
		t.Fatalf("genuine request answered %d %q %q", want.StatusCode, want.Body, want.Error)
	}
	if got.StatusCode == want.StatusCode && string(got.Body) == string(want.Body) {
		t.Fatalf("the crafted request shared the genuine one's response %q", got.Body)
	}
	if got.Error == "" {
		t.Errorf("the crafted request, whose header holds a NUL, was answered %d %q; want it refused", got.StatusCode, got.Body)
	}
}

// TestCoalesceKeyDistinct: requests that differ in any field the cloud
// sees have different keys, however their fields are split.
func TestCoalesceKeyDistinct(t *testing.T) {
	url := "https://api.example/servers"
	hs := func(kv ...string) []abi.Header {
		var out []abi.Header
		for i := 0; i < len(kv); i += 2 {
			out = append(out, abi.Header{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	requests := []*abi.HTTPRequest{
		{Method: "GET", URL: url},
		{Method: "HEAD", URL: url},
		{Method: "GET", URL: url + "?page=2"},
		{Method: "GET", URL: url, Headers: hs("A", "1", "B", "2")},
		{Method: "GET", URL: url, Headers: hs("A", "1\x00B\x002")},
		{Method: "GET", URL: url, Headers: hs("A\x001\x00B", "2")},
		{Method: "GET", URL: url, Headers: hs("A", "1\x00B", "2", "")},
		{Method: "GET", URL: url, Headers: hs(abi.HeaderCredential, "reader")},
		{Method: "GET", URL: url, Headers: hs(abi.HeaderCredential, "admin")},
		{Method: "GET", URL: url + "\x00" + abi.HeaderCredential + "\x00admin"},
	}
	seen := map[string]int{}
	for i, req := range requests {
		key, ok := coalesceKey(req)
		if !ok {
			t.Fatalf("request %d is not coalescable", i)
		}
		if j, dup := seen[key]; dup {
			t.Errorf("requests %d and %d share the key %q", j, i, strings.ReplaceAll(key, "\x00", `\0`))
		}
		seen[key] = i
	}
}
