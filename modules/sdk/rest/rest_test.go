//go:build !wasip1

package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// roundTripper answers every request with fn and records the last request.
type roundTripper struct {
	fn   func(*http.Request) (*http.Response, error)
	last *http.Request
	body string
}

func (rt *roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.last = r
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		rt.body = string(b)
	}
	return rt.fn(r)
}

func respond(status int, header map[string]string, body string) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) {
		h := http.Header{}
		for k, v := range header {
			h.Set(k, v)
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

// noRawReads is a Host whose credentials cannot be read: the client must
// name its credential for the host to apply, never read it.
type noRawReads struct{ *native.Host }

func (noRawReads) Credential(name string) (string, error) {
	panic("the client read credential " + name)
}

func client(rt http.RoundTripper) *rest.Client {
	return &rest.Client{
		Host:       noRawReads{&native.Host{Transport: rt}},
		Name:       "mycloud",
		BaseURL:    "https://api.example.com/v2",
		Credential: "token",
		Timeout:    5 * time.Second,
	}
}

func TestRequestBuilding(t *testing.T) {
	rt := &roundTripper{fn: respond(201, map[string]string{"Content-Type": "application/json"}, `{"id":"lb-1","ports":[80]}`)}
	var out struct {
		ID    string `json:"id"`
		Ports []int  `json:"ports"`
	}
	resp, err := client(rt).Do(context.Background(), &rest.Request{
		What: "creating lb", Method: "POST", Path: "/lbs/" + rest.PathEscape("a b"),
		Query: []rest.Param{{Name: "zone", Value: "eu/1"}, {Name: "dry", Value: "no"}},
		Body:  []byte(`{"name":"x"}`), Into: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || out.ID != "lb-1" || len(out.Ports) != 1 {
		t.Fatalf("got %d %+v", resp.StatusCode, out)
	}
	r := rt.last
	checks := map[string][2]string{
		"method":        {r.Method, "POST"},
		"URL":           {r.URL.String(), "https://api.example.com/v2/lbs/a%20b?zone=eu%2F1&dry=no"},
		"credential":    {r.Header.Get(abi.HeaderCredential), "token"},
		"Authorization": {r.Header.Get("Authorization"), ""},
		"Content-Type":  {r.Header.Get("Content-Type"), "application/json"},
		"Accept":        {r.Header.Get("Accept"), "application/json"},
		"body":          {rt.body, `{"name":"x"}`},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", what, c[0], c[1])
		}
	}
	if deadline, ok := r.Context().Deadline(); !ok || time.Until(deadline) > 5*time.Second {
		t.Errorf("request deadline %v %v, want within the client's 5s", deadline, ok)
	}
}

// TestFormRequest: a query API's request, its parameters form-encoded in
// the body as the API's own SDKs send them (url.Values.Encode, which sorts
// them; here in the order given), and its JSON answer decoded.
func TestFormRequest(t *testing.T) {
	rt := &roundTripper{fn: respond(200, map[string]string{"Content-Type": "application/json"}, `{"Instances":[{"Id":"i-1"}],"NextToken":"t2"}`)}
	var out struct {
		Instances []struct{ Id string }
		NextToken string
	}
	_, err := client(rt).Do(context.Background(), &rest.Request{
		What: "describing instances", Method: "POST", Path: "/",
		Form: []rest.Param{{Name: "Action", Value: "DescribeInstances"}, {Name: "Filter.1.Value", Value: "a b&c=d/é"}, {Name: "NextToken", Value: "t1"}},
		Body: []byte(`ignored`), Into: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || out.NextToken != "t2" {
		t.Fatalf("decoded %+v", out)
	}
	form, err := url.ParseQuery(rt.body)
	if err != nil || form.Get("Action") != "DescribeInstances" || form.Get("Filter.1.Value") != "a b&c=d/é" || form.Get("NextToken") != "t1" || len(form) != 3 {
		t.Errorf("body %q: %v %v", rt.body, form, err)
	}
	if ct := rt.last.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" || rt.last.URL.String() != "https://api.example.com/v2/" {
		t.Errorf("Content-Type %q, URL %s", ct, rt.last.URL)
	}
}

// lockedLater is a RetryLater that judges an error body naming a lock
// passing, for 4 seconds.
func lockedLater(r *abi.HTTPResponse) (time.Duration, bool) {
	return 4 * time.Second, strings.Contains(string(r.Body), `"locked"`)
}

// TestStatusMapping is the contract: which answers are "not found", which
// are "retry after", and that everything else is an error, not absence.
func TestStatusMapping(t *testing.T) {
	jsonCT := map[string]string{"Content-Type": "application/json"}
	tests := []struct {
		name     string
		answer   func(*http.Request) (*http.Response, error)
		notFound bool
		absent   func(*abi.HTTPResponse) bool
		later    func(*abi.HTTPResponse) (time.Duration, bool)
		accept   []int32
		want     abi.Status // as the module reports it to the host
		after    time.Duration
		contains string
	}{
		{name: "200", answer: respond(200, jsonCT, `{}`), want: abi.StatusOK},
		{name: "404 where the caller says absent", answer: respond(404, jsonCT, `{"error":"no lb"}`), notFound: true, want: abi.StatusNotFound},
		{name: "404 where the caller does not", answer: respond(404, jsonCT, `{}`), want: abi.StatusError, contains: "cloud answered 404"},
		{name: "404 the caller's Absent rejects", answer: respond(404, nil, `<html>`), notFound: true,
			absent: func(r *abi.HTTPResponse) bool { return r.Header("Content-Type") == "application/json" }, want: abi.StatusError},
		{name: "429 without Retry-After", answer: respond(429, nil, ``), want: abi.StatusRetryAfter, after: time.Second},
		{name: "429 with Retry-After", answer: respond(429, map[string]string{"Retry-After": "7"}, ``), want: abi.StatusRetryAfter, after: 7 * time.Second},
		{name: "503 with Retry-After", answer: respond(503, map[string]string{"Retry-After": "3"}, ``), want: abi.StatusRetryAfter, after: 3 * time.Second},
		{name: "503 without Retry-After", answer: respond(503, nil, `down`), want: abi.StatusError, contains: `cloud answered 503: unexpected body "down"`},
		{name: "500 on a NotFound request", answer: respond(500, map[string]string{"Retry-After": "3"}, ``), notFound: true, want: abi.StatusError, contains: "cloud answered 500: (empty body)"},
		{name: "401", answer: respond(401, nil, `denied`), want: abi.StatusError, contains: `check the credential "token" in the cloud-config's credentials.auth`},
		{name: "409 accepted", answer: respond(409, nil, ``), accept: []int32{409}, want: abi.StatusOK},
		{name: "423 the caller's RetryLater judges passing", answer: respond(423, jsonCT, `{"error":"locked"}`), later: lockedLater,
			want: abi.StatusRetryAfter, after: 4 * time.Second, contains: "cloud answered 423"},
		{name: "409 the caller's RetryLater does not judge passing", answer: respond(409, jsonCT, `{"error":"exists"}`), later: lockedLater,
			want: abi.StatusError, contains: "cloud answered 409"},
		{name: "definitive 404 stays not found whatever RetryLater says", answer: respond(404, jsonCT, `{"error":"locked"}`), notFound: true,
			later: lockedLater, want: abi.StatusNotFound},
		{name: "no response", answer: func(*http.Request) (*http.Response, error) { return nil, errors.New("connection reset by peer") },
			notFound: true, want: abi.StatusError, contains: "GET /x/1: no response: "},
		{name: "undecodable 200", answer: respond(200, jsonCT, `{"trunc`), want: abi.StatusError, contains: "decoding the cloud's 200 response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client(&roundTripper{fn: tt.answer})
			c.Absent = tt.absent
			c.RetryLater = tt.later
			var into map[string]any
			_, err := c.Do(context.Background(), &rest.Request{What: "getting x", Method: "GET", Path: "/x/1", NotFound: tt.notFound, Accept: tt.accept, Into: &into})
			o := sdk.OutcomeOf(err)
			if o.Status != tt.want || o.RetryAfter != tt.after {
				t.Fatalf("outcome %v after %v (%v), want %v after %v", o.Status, o.RetryAfter, err, tt.want, tt.after)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "mycloud: getting x: GET /x/1") {
				t.Errorf("error %q does not say what was done", err)
			}
			if !strings.Contains(o.Message, tt.contains) {
				t.Errorf("message %q does not contain %q", o.Message, tt.contains)
			}
		})
	}
}

// TestNoCredential: a client without a credential names none.
func TestNoCredential(t *testing.T) {
	rt := &roundTripper{fn: respond(200, nil, `{}`)}
	c := client(rt)
	c.Credential = ""
	if _, err := c.Do(context.Background(), &rest.Request{What: "w", Method: "GET", Path: "/"}); err != nil {
		t.Fatal(err)
	}
	for name := range rt.last.Header {
		if strings.HasPrefix(name, abi.HeaderPrefix) || name == "Authorization" {
			t.Errorf("request carries %s", name)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", time.Second, true},
		{"999999", time.Hour, true},
		{"", 0, false},
		{"soon", 0, false},
		{"-1", 0, false},
		{time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat), time.Second, true},
	}
	for _, tt := range tests {
		if got, ok := rest.RetryAfterHeader(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfterHeader(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	if got, ok := rest.RetryAfterHeader(future); !ok || got < 80*time.Second || got > 90*time.Second {
		t.Errorf("RetryAfterHeader(%q) = %v, %v", future, got, ok)
	}
}

func TestPathEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"node-a.example_1~", "node-a.example_1~"},
		{"a b/c?d&e=f%", "a%20b%2Fc%3Fd%26e%3Df%25"},
		{"ü", "%C3%BC"},
	}
	for _, tt := range tests {
		if got := rest.PathEscape(tt.in); got != tt.want {
			t.Errorf("PathEscape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  \n", "(empty body)"},
		{"bad\x00\xffgateway\n", `unexpected body "bad??gateway"`},
		{strings.Repeat("x", 300), `unexpected body "` + strings.Repeat("x", 200) + `"`},
	}
	for _, tt := range tests {
		if got := rest.Excerpt([]byte(tt.in)); got != tt.want {
			t.Errorf("Excerpt(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMember: an envelope's member decodes; a missing or null one, or one
// of the wrong shape, is an error naming it, never a zero value.
func TestMember(t *testing.T) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(`{"server": {"name": "node-1"}, "gone": null, "count": "x"}`), &body); err != nil {
		t.Fatal(err)
	}
	var server struct{ Name string }
	if err := rest.Member(body, "server", &server); err != nil || server.Name != "node-1" {
		t.Fatalf("server: %+v, %v", server, err)
	}
	var n int
	for key, want := range map[string]string{"missing": `the response has no "missing"`, "gone": `the response has no "gone"`, "count": `decoding "count"`} {
		if err := rest.Member(body, key, &n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Member(%q): %v, want an error containing %q", key, err, want)
		}
	}
}
