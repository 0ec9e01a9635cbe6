package egress

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	var released sync.Once
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
	// A failed check must not leave the handlers, hence srv.Close, waiting.
	defer released.Do(func() { close(release) })
	h, err := New("t", Config{AllowedOrigins: []string{srv.URL}, Timeout: 5 * time.Second, MaxResponseBytes: 1 << 20, MaxRequestBytes: 1 << 20}, nil)
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
		wg.Go(func() { bodies[i] = string(answer(ctx, h, get()).Body) })
	}
	waitFor(t, func() bool { return gets.Load() == 1 })
	time.Sleep(50 * time.Millisecond) // the other three join meanwhile
	if gets.Load() != 1 {
		t.Errorf("%d GETs reached the cloud, want 1", gets.Load())
	}

	// A write finishes while the first read is still in flight: a read
	// after it must not take the older answer.
	if resp := answer(ctx, h, &abi.HTTPRequest{Method: "POST", URL: srv.URL + "/servers"}); resp.Error != "" || posts.Load() != 1 {
		t.Fatalf("POST: %+v", resp)
	}
	wg.Go(func() { answer(ctx, h, get()) })
	waitFor(t, func() bool { return gets.Load() == 2 })
	wg.Go(func() { answer(ctx, h, get(abi.Header{Name: "Cache-Control", Value: "no-cache"})) })
	waitFor(t, func() bool { return gets.Load() == 3 })
	released.Do(func() { close(release) })
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
	h, err := New("t", Config{AllowedOrigins: []string{srv.URL}}, nil)
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
	go func() { genuineResp <- answer(ctx, h, genuine) }()
	<-arrived
	craftedResp := make(chan *abi.HTTPResponse, 1)
	go func() { craftedResp <- answer(ctx, h, crafted) }()
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
		{Method: "POST", URL: url, Body: []byte("Action=DescribeInstances"), Headers: hs(abi.HeaderReadOnly, abi.ReadOnlyValue)},
		{Method: "POST", URL: url, Body: []byte("Action=DescribeVpcs"), Headers: hs(abi.HeaderReadOnly, abi.ReadOnlyValue)},
		{Method: "POST", URL: url, Headers: hs(abi.HeaderReadOnly, abi.ReadOnlyValue)},
		{Method: "GET", URL: url, Headers: hs(abi.HeaderReadOnly, abi.ReadOnlyValue)},
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
	for _, req := range []*abi.HTTPRequest{
		{Method: "POST", URL: url, Body: []byte("Action=TerminateInstances")},
		{Method: "GET", URL: url, Body: []byte("a body")},
		{Method: "POST", URL: url, Body: []byte("Action=DescribeInstances"), Headers: hs(abi.HeaderReadOnly, abi.ReadOnlyValue, "Cache-Control", "no-cache")},
	} {
		if key, ok := coalesceKey(req); ok {
			t.Errorf("%s %q with headers %v is coalescable (key %q): only reads marked or without a body are, and not opted out", req.Method, req.Body, req.Headers, key)
		}
	}
}

// TestCoalescedReadOnlyPosts: POSTs marked abi.HeaderReadOnly (ABI
// revision 5) are coalesced like GETs when identical, body included, and
// reach the cloud without the mark; unmarked POSTs never are, and a
// marked one is no write, so a read in flight before it is still joined.
func TestCoalescedReadOnlyPosts(t *testing.T) {
	var mu sync.Mutex
	arrived := map[string]int{}
	release := make(chan struct{})
	var released sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		arrived[r.Method+" "+string(body)]++
		mu.Unlock()
		if r.Header.Get(abi.HeaderReadOnly) != "" {
			t.Errorf("the cloud received %s", abi.HeaderReadOnly)
		}
		<-release
		w.Write(append([]byte("answer to "), body...))
	}))
	defer srv.Close()
	// A failed check must not leave the handlers, hence srv.Close, waiting.
	defer released.Do(func() { close(release) })
	h, err := New("t", Config{AllowedOrigins: []string{srv.URL}, Timeout: 5 * time.Second, MaxResponseBytes: 1 << 20, MaxRequestBytes: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string, marked bool) *abi.HTTPRequest {
		req := &abi.HTTPRequest{Method: "POST", URL: srv.URL + "/", Body: []byte(body)}
		if marked {
			req.Headers = []abi.Header{{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue}}
		}
		return req
	}
	count := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return arrived[key]
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	answers := make([]string, 6)
	for i := range 3 {
		wg.Go(func() { answers[i] = string(answer(ctx, h, post("Action=DescribeInstances", true)).Body) })
	}
	waitFor(t, func() bool { return count("POST Action=DescribeInstances") == 1 })
	// The other two have joined before any write begins.
	key, _ := coalesceKey(post("Action=DescribeInstances", true))
	waitFor(t, func() bool {
		h.flights.mu.Lock()
		defer h.flights.mu.Unlock()
		fl := h.flights.inFlight[key]
		return fl != nil && fl.joined.Load() == 2
	})
	wg.Go(func() { answers[3] = string(answer(ctx, h, post("Action=DescribeVpcs", true)).Body) })
	for i := 4; i < 6; i++ {
		wg.Go(func() { answers[i] = string(answer(ctx, h, post("Action=DescribeInstances", false)).Body) })
	}
	waitFor(t, func() bool {
		return count("POST Action=DescribeVpcs") == 1 && count("POST Action=DescribeInstances") == 3
	})
	// The marked POSTs wrote nothing: an identical marked one still joins
	// the first flight. The unmarked ones did count as writes, so it is
	// sent again; one more after it joins that.
	wg.Go(func() { answer(ctx, h, post("Action=DescribeInstances", true)) })
	waitFor(t, func() bool { return count("POST Action=DescribeInstances") == 4 })
	wg.Go(func() { answer(ctx, h, post("Action=DescribeInstances", true)) })
	time.Sleep(50 * time.Millisecond) // it joins meanwhile
	released.Do(func() { close(release) })
	wg.Wait()
	if n := count("POST Action=DescribeInstances"); n != 4 {
		t.Errorf("%d DescribeInstances POSTs reached the cloud, want 4: 1 for 3 marked, 2 unmarked, 1 for 2 marked after the unmarked", n)
	}
	for i, a := range answers {
		want := "answer to Action=DescribeInstances"
		if i == 3 {
			want = "answer to Action=DescribeVpcs"
		}
		if a != want {
			t.Errorf("request %d answered %q, want %q", i, a, want)
		}
	}

	bad := post("Action=DescribeInstances", true)
	bad.Headers[0].Value = "yes"
	if resp := answer(ctx, h, bad); !strings.HasPrefix(resp.Error, "denied: ") {
		t.Errorf("a request with %s: yes was answered %+v; want it denied", abi.HeaderReadOnly, resp)
	}
}

// TestReadOnlyMarkOnWritesRefused: the read-only mark on a method other
// than POST or QUERY (or a read's) fails the request unsent, however many
// identical ones there are, and such a request still orders the reads: a
// read after it never joins one begun before it.
func TestReadOnlyMarkOnWritesRefused(t *testing.T) {
	var gets, others atomic.Int32
	release := make(chan struct{})
	var released sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			others.Add(1)
			return
		}
		gets.Add(1)
		<-release
	}))
	defer srv.Close()
	defer released.Do(func() { close(release) })
	h, err := New("t", Config{AllowedOrigins: []string{srv.URL}, Timeout: 5 * time.Second, MaxResponseBytes: 1 << 20, MaxRequestBytes: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	get := &abi.HTTPRequest{Method: "GET", URL: srv.URL + "/servers"}
	wg.Go(func() { answer(ctx, h, get) })
	waitFor(t, func() bool { return gets.Load() == 1 })
	marked := []abi.Header{{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue}}
	for _, method := range []string{"DELETE", "PUT", "PATCH", "OPTIONS", "post"} {
		answers := make([]*abi.HTTPResponse, 2)
		for i := range answers {
			wg.Go(func() {
				answers[i] = answer(ctx, h, &abi.HTTPRequest{Method: method, URL: srv.URL + "/servers/1", Body: []byte("{}"), Headers: marked})
			})
		}
		waitFor(t, func() bool { return answers[0] != nil && answers[1] != nil })
		for i, resp := range answers {
			if want := "denied: header Wasmccm-Read-Only is for a POST or QUERY, not " + method; resp.Error != want {
				t.Errorf("marked %s %d: %+v, want the error %q", method, i, resp, want)
			}
		}
		if key, ok := coalesceKey(&abi.HTTPRequest{Method: method, URL: srv.URL, Headers: marked}); ok {
			t.Errorf("a marked %s is coalescable (key %q)", method, key)
		}
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d marked writes reached the cloud", n)
	}
	wg.Go(func() { answer(ctx, h, get) })
	waitFor(t, func() bool { return gets.Load() == 2 })
	released.Do(func() { close(release) })
	wg.Wait()
}
