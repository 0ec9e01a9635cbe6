package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// TestAuthRedirects: through the module's HTTP client, a credential is
// applied at each hop to that hop's origin, and a redirect to an allowed
// origin it is not bound to fails without reaching it.
func TestAuthRedirects(t *testing.T) {
	var elsewhereHits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhereHits.Add(1) }))
	defer elsewhere.Close()
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusFound)
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/collect", http.StatusFound)
		}
	}))
	defer api.Close()
	cfg := Config{Name: "redirects",
		HTTP:        egress.Config{AllowedOrigins: []string{api.URL, elsewhere.URL}},
		Credentials: credentials.Config{Dir: credentialstest.SecretDir(t, map[string]string{"token": "s3cret"}), Auth: []credentials.AuthConfig{{Name: "token", Origins: []string{api.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}},
	}.withDefaults()
	store, _ := credentials.NewStore(cfg.Credentials)
	h, err := newEgressClient(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	named := []abi.Header{{Name: abi.HeaderCredential, Value: "token"}}
	if resp := answer(context.Background(), h, &abi.HTTPRequest{URL: api.URL + "/moved", Headers: named}); resp.Error != "" || resp.StatusCode != 200 {
		t.Fatalf("same-origin redirect: %+v", resp)
	}
	if want := "/moved Bearer s3cret,/here Bearer s3cret"; strings.Join(seen, ",") != want {
		t.Errorf("the API saw %q, want %q", seen, want)
	}
	resp := answer(context.Background(), h, &abi.HTTPRequest{URL: api.URL + "/away", Headers: named})
	if !strings.Contains(resp.Error, `credential "token" is not bound to origin `+elsewhere.URL) || elsewhereHits.Load() != 0 {
		t.Errorf("redirect to an unbound origin: %+v, %d requests reached it", resp, elsewhereHits.Load())
	}
}

// TestOAuth2TokenSharedByInstances: a pool of 4 instances under concurrent
// calls makes one token request per token lifetime, refreshed before the
// token expires.
func TestOAuth2TokenSharedByInstances(t *testing.T) {
	tokens := credentialstest.NewTokenServer(t, "s3cret", 4) // replaced 1 s before it expires
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.PoolSize = 4
		c.Credentials.Dir = credentialstest.SecretDir(t, map[string]string{"client-id": "ccm", "client-secret": "pw"})
		c.Credentials.Auth = []credentials.AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{
			TokenURL: tokens.URL + "/token", ClientIDKey: "client-id", ClientSecretKey: "client-secret", Scopes: []string{"compute"}}}}
	})
	burst := func() {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					if err := f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{}); err != nil {
						t.Errorf("worker %d call %d: %v", w, i, err)
					}
				}
			})
		}
		wg.Wait()
	}
	burst()
	if n := tokens.Hits.Load(); n != 1 || tokens.Grant != "client_credentials" {
		t.Fatalf("40 calls on 4 instances made %d token requests (grant %q), want 1", n, tokens.Grant)
	}
	time.Sleep(3100 * time.Millisecond)
	burst()
	if n := tokens.Hits.Load(); n != 2 {
		t.Fatalf("after the refresh time, %d token requests in all, want 2", n)
	}
}

// TestOAuth2ClientSecretRotation: a rotated client secret is used at the
// next call, without waiting for the token to expire, and without restart.
func TestOAuth2ClientSecretRotation(t *testing.T) {
	tokens := credentialstest.NewTokenServer(t, "s3cret", 3600)
	tokens.Secret = "old"
	dir := credentialstest.SecretDir(t, map[string]string{"client-id": "ccm", "client-secret": "old"})
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = dir
		c.Credentials.Auth = []credentials.AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{
			TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}}}
	})
	call := func() error {
		return f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{})
	}
	if err := call(); err != nil || tokens.Hits.Load() != 1 {
		t.Fatalf("first call: %v, %d token requests", err, tokens.Hits.Load())
	}
	// The endpoint now accepts only the new secret; the old token would
	// still be valid for an hour.
	tokens.Mu.Lock()
	tokens.Secret = "new-secret"
	tokens.Mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "client-secret"), []byte("new-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call(); err != nil || tokens.Hits.Load() != 2 {
		t.Fatalf("after rotating the client secret: %v, %d token requests, want a new exchange", err, tokens.Hits.Load())
	}
	if err := call(); err != nil || tokens.Hits.Load() != 2 {
		t.Fatalf("the new token is not reused: %v, %d token requests", err, tokens.Hits.Load())
	}
}

// TestGoogleServiceAccount: the host exchanges a JWT signed with the key
// for a token, and the tokenURL setting overrides the key's token_uri.
func TestGoogleServiceAccount(t *testing.T) {
	tokens := credentialstest.NewTokenServer(t, "s3cret", 3600)
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = credentialstest.SecretDir(t, map[string]string{"key.json": credentialstest.ServiceAccountKey(t, "https://oauth2.googleapis.com/token")})
		c.Credentials.Auth = []credentials.AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, GoogleServiceAccount: &credentials.GoogleServiceAccountAuth{
			Key: "key.json", Scopes: []string{"https://www.googleapis.com/auth/compute"}, TokenURL: tokens.URL}}}
	})
	for range 3 {
		if err := f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := tokens.Hits.Load(); n != 1 || tokens.Grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		t.Fatalf("%d token requests with grant %q, want 1 JWT bearer grant", n, tokens.Grant)
	}
}

// TestTokenFailures: a failed exchange and a malformed key fail the call
// with an error that says so (never "not found"), are tried again only
// after a backoff however often the module calls, and are reported once.
func TestTokenFailures(t *testing.T) {
	tokens := credentialstest.NewTokenServer(t, "s3cret", 3600)
	tokens.Fail = true
	dir := credentialstest.SecretDir(t, map[string]string{"client-id": "ccm", "client-secret": "pw", "key.json": `{"type": "service_account", "private_key": "not a key"`})
	var reports []string
	var mu sync.Mutex
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = dir
		c.Credentials.Auth = []credentials.AuthConfig{
			{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{
				TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}},
			{Name: "absent", Origins: c.HTTP.AllowedOrigins, GoogleServiceAccount: &credentials.GoogleServiceAccountAuth{Key: "key.json", Scopes: []string{"s"}, TokenURL: tokens.URL}},
		}
		c.Credentials.OnAuthFailure = func(credential string, err error) {
			mu.Lock()
			reports = append(reports, credential+": "+err.Error())
			mu.Unlock()
		}
	})
	call := func(node string) error {
		return f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: node}, &abi.InstanceMetadata{})
	}
	for _, c := range []struct{ node, want string }{
		{"n", `credential "token": token exchange with ` + tokens.URL},
		{"cred-missing", `credential "absent": key "key.json" is not a Google service account JSON key`},
	} {
		deadline := time.Now().Add(500 * time.Millisecond)
		for i := 0; time.Now().Before(deadline); i++ {
			err := call(c.node)
			var status *StatusError
			if !errors.As(err, &status) || status.Status != abi.StatusError || !strings.Contains(status.Message, c.want) {
				t.Fatalf("%s, call %d: %v, want an Error status with %q", c.node, i, err, c.want)
			}
			if i > 0 && !strings.Contains(status.Message, "not tried again for") {
				t.Fatalf("%s, call %d: %v, want the backoff named", c.node, i, err)
			}
		}
	}
	// The OAuth2 library sends the client credentials in a header, then in
	// the form: one exchange is two requests. The malformed key never
	// reaches the endpoint.
	if n := tokens.Hits.Load(); n != 2 {
		t.Errorf("%d token requests in 1 s of calls, want the 2 of one exchange", n)
	}
	mu.Lock()
	if len(reports) != 2 || !strings.HasPrefix(reports[0], "token: ") || !strings.HasPrefix(reports[1], "absent: ") {
		t.Errorf("reports %q, want one per credential", reports)
	}
	mu.Unlock()

	tokens.Mu.Lock()
	tokens.Fail = false
	tokens.Mu.Unlock()
	// The first backoff is a second: the call succeeds soon after.
	deadline := time.Now().Add(3 * time.Second)
	for err := call("n"); err != nil; err = call("n") {
		if time.Now().After(deadline) {
			t.Fatalf("after the backoff, with the endpoint back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCredentialRotation: a rotated Secret takes effect on the next call,
// with no restart, through the kubelet's symlink swap. That the store
// reads the file once per rotation is TestStoreFollowsRotation's, in
// runtime/credentials.
func TestCredentialRotation(t *testing.T) {
	f := newFixture(t, wasmbuild.Go, nil)
	dir := f.mod.cfg.Credentials.Dir
	call := func() error {
		return f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{})
	}
	credentialstest.RotateSecret(t, dir, "token", "wrong")
	if err := call(); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("with a wrong token: %v", err)
	}
	credentialstest.RotateSecret(t, dir, "token", "s3cret")
	for range 3 {
		if err := call(); err != nil {
			t.Fatalf("after rotation back: %v", err)
		}
	}
}
