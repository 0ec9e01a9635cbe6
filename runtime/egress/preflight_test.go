package egress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
	"github.com/wasmccm/wasmccm/runtime/origin"
)

// TestRefusedRequestsCostNoToken: requests the host refuses take nothing
// from the rate budget. The budget has room for one request an hour; after
// each kind of refused request, sent several times, a valid request still
// goes at once.
func TestRefusedRequestsCostNoToken(t *testing.T) {
	var sent atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer api.Close()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	dir := credentialstest.SecretDir(t, map[string]string{"token": "s3cret"})
	named := func(headers ...abi.Header) []abi.Header {
		return append([]abi.Header{{Name: abi.HeaderCredential, Value: "token"}}, headers...)
	}
	cases := []struct {
		name string
		req  abi.HTTPRequest
	}{
		{"credential not granted", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "admin"}}}},
		{"credential not bound to the origin", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "elsewhere"}}}},
		{"unknown reserved header", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderPrefix + "Bogus", Value: "1"}}}},
		{"read-only mark with another value", abi.HTTPRequest{Method: "POST", Headers: named(abi.Header{Name: abi.HeaderReadOnly, Value: "yes"})}},
		{"read-only mark on a DELETE", abi.HTTPRequest{Method: "DELETE", Headers: named(abi.Header{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue})}},
		{"read-only mark on a PUT", abi.HTTPRequest{Method: "PUT", Headers: named(abi.Header{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue})}},
		{"credential's header set by the module", abi.HTTPRequest{Headers: named(abi.Header{Name: "Authorization", Value: "Bearer mine"})}},
		{"sigv4 header without a credential", abi.HTTPRequest{Headers: []abi.Header{{Name: abi.HeaderSigV4Region, Value: "eu-west-1"}}}},
		{"invalid header name", abi.HTTPRequest{Headers: named(abi.Header{Name: "X Bad", Value: "1"})}},
		{"header value with a line break", abi.HTTPRequest{Headers: named(abi.Header{Name: "X-Note", Value: "a\r\nX-Injected: 1"})}},
		{"invalid method", abi.HTTPRequest{Method: "GET /", Headers: named()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent.Store(0)
			budget, err := NewRateBudget("test", []cloudconfig.RateLimit{{Origin: api.URL, PerHour: 1}}, []string{api.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			allowed := []string{api.URL, other.URL}
			creds := credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
				{Name: "token", Origins: []string{api.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
				{Name: "elsewhere", Origins: []string{other.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
			}}
			store, _ := credentials.NewStore(creds)
			set, _ := origin.ParseSet(allowed)
			auth, err := credentials.New("refused", creds, set, store)
			if err != nil {
				t.Fatal(err)
			}
			h, err := New("refused", Config{AllowedOrigins: allowed, Budget: budget}, auth)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			refused := tc.req
			refused.URL = api.URL + "/servers"
			for range 3 {
				if resp := answer(ctx, h, &refused); resp.Error == "" {
					t.Fatalf("answered %d %q, want the host's refusal", resp.StatusCode, resp.Body)
				}
			}
			if n := sent.Load(); n != 0 {
				t.Fatalf("%d refused requests reached the cloud", n)
			}
			start := time.Now()
			resp := answer(ctx, h, &abi.HTTPRequest{URL: api.URL + "/servers", Headers: named()})
			if resp.StatusCode != http.StatusOK || time.Since(start) > time.Second {
				t.Fatalf("valid request after the refused ones answered %d %q %q after %v; want 200 at once: the refused ones took its token",
					resp.StatusCode, resp.Error, resp.Body, time.Since(start))
			}
		})
	}
}
