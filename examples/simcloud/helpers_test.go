package simcloud

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testToken = "t0ken"

type testEnv struct {
	t     *testing.T
	cloud *Cloud
	srv   *httptest.Server
}

func newTestEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	c := New(opts)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &testEnv{t: t, cloud: c, srv: srv}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// decode decodes the body into v, failing the test on error.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// errMsg returns the "error" field of an error body.
func (r response) errMsg(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	r.decode(t, &e)
	if e.Error == "" {
		t.Fatalf("status %d: no error message in %q", r.status, r.body)
	}
	return e.Error
}

// request sends a request with the given Authorization header value (none
// if empty). body is sent as is if it is a string, JSON-encoded otherwise.
func (e *testEnv) request(method, path, auth string, body any) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(b) > 0 && !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") && !strings.HasPrefix(path, "/healthz") {
		e.t.Errorf("%s %s: Content-Type %q", method, path, res.Header.Get("Content-Type"))
	}
	return response{res.StatusCode, res.Header, b}
}

// api calls /v1 with the test token.
func (e *testEnv) api(method, path string, body any) response {
	e.t.Helper()
	return e.request(method, path, "Bearer "+testToken, body)
}

// admin calls /admin without a token.
func (e *testEnv) admin(method, path string, body any) response {
	e.t.Helper()
	return e.request(method, path, "", body)
}

func (e *testEnv) mustInstance(name string) Instance {
	e.t.Helper()
	in, err := e.cloud.AddInstance(Instance{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

func expectStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
}

func lbBody(name string, targets ...string) LoadBalancer {
	if targets == nil {
		targets = []string{}
	}
	return LoadBalancer{
		Name:    name,
		Ports:   []Port{{Name: "http", Protocol: ProtocolTCP, Port: 80, NodePort: 30080}},
		Targets: targets,
	}
}
