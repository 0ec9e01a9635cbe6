package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// secretDir writes Secret keys into a fresh directory.
func secretDir(t testing.TB, keys map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// recorder is the network below the auth transport: it keeps the requests
// that reached it.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func (r *recorder) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return nil
	}
	return r.reqs[len(r.reqs)-1]
}

func newAuthTransport(t testing.TB, cfg CredentialsConfig, next http.RoundTripper) *authTransport {
	t.Helper()
	rt, err := NewAuthTransport("test", cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	return rt.(*authTransport)
}

// TestAuthSchemes: each static scheme sets what it should and nothing the
// module sent in the reserved headers reaches the network; every misuse is
// refused before anything is sent.
func TestAuthSchemes(t *testing.T) {
	dir := secretDir(t, map[string]string{"token": "s3cret\n", "user": "alice", "password": "pw", "apikey": "k3y", "bad": "line\r\nX-Evil: 1"})
	api := "https://api.example"
	net := &recorder{}
	rt := newAuthTransport(t, CredentialsConfig{Dir: dir, Auth: []AuthConfig{
		{Name: "bearer", Origins: []string{api}, Bearer: &BearerAuth{Key: "token"}},
		{Name: "basic", Origins: []string{api}, Basic: &BasicAuth{UsernameKey: "user", PasswordKey: "password"}},
		{Name: "header", Origins: []string{api}, Header: &HeaderAuth{Name: "X-Auth-Token", Key: "apikey"}},
		{Name: "missing", Origins: []string{api}, Bearer: &BearerAuth{Key: "absent"}},
		{Name: "malformed", Origins: []string{api}, Bearer: &BearerAuth{Key: "bad"}},
	}}, net)
	send := func(url string, headers ...string) (*http.Request, error) {
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		before := len(net.reqs)
		_, err := rt.RoundTrip(req)
		if err != nil {
			if len(net.reqs) != before {
				t.Errorf("%v: refused, yet sent", headers)
			}
			return nil, err
		}
		return net.last(), nil
	}
	for _, c := range []struct {
		credential, header, want string
	}{
		{"bearer", "Authorization", "Bearer s3cret"},
		{"basic", "Authorization", "Basic YWxpY2U6cHc="},
		{"header", "X-Auth-Token", "k3y"},
	} {
		got, err := send(api+"/v1/x", "wasmccm-credential", c.credential, "Accept", "application/json")
		if err != nil {
			t.Fatalf("%s: %v", c.credential, err)
		}
		if got.Header.Get(c.header) != c.want || got.Header.Get("Accept") != "application/json" {
			t.Errorf("%s: headers %v, want %s: %s", c.credential, got.Header, c.header, c.want)
		}
		for name := range got.Header {
			if hasReservedPrefix(name) {
				t.Errorf("%s: reserved header %s reached the network", c.credential, name)
			}
		}
	}
	if got, err := send(api+"/v1/x", "Authorization", "Bearer mine"); err != nil || got.Header.Get("Authorization") != "Bearer mine" {
		t.Errorf("a request naming no credential is sent as the module wrote it: %v %v", got, err)
	}
	for _, c := range []struct {
		url     string
		headers []string
		want    string
		denied  bool
	}{
		{api + "/", []string{abi.HeaderCredential, "other"}, `credential "other" is not in credentials.auth`, true},
		{"https://elsewhere.example/", []string{abi.HeaderCredential, "bearer"}, `credential "bearer" is not bound to origin https://elsewhere.example:443`, true},
		{"http://api.example/", []string{abi.HeaderCredential, "bearer"}, "not bound to origin http://api.example:80", true},
		{api + "/", []string{abi.HeaderCredential, "bearer", "Authorization", "Bearer forged"}, "may not set the header it sets", true},
		{api + "/", []string{abi.HeaderCredential, "header", "x-auth-token", "forged"}, "may not set the header it sets", true},
		{api + "/", []string{"Wasmccm-Cache", "1"}, "header Wasmccm-Cache is reserved for the host and unknown to it", true},
		{api + "/", []string{abi.HeaderSigV4Region, "eu-west-1"}, "need Wasmccm-Credential", true},
		{api + "/", []string{abi.HeaderCredential, "bearer", abi.HeaderSigV4Service, "ec2"}, "is not a sigv4 credential", true},
		{api + "/", []string{abi.HeaderCredential, "missing"}, `credential "missing": key "absent" is not in the credentials directory`, false},
		{api + "/", []string{abi.HeaderCredential, "malformed"}, `credential "malformed": key "bad" contains a control character`, false},
	} {
		_, err := send(c.url, c.headers...)
		var denied *deniedError
		var authErr *AuthError
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &denied) != c.denied || errors.As(err, &authErr) == c.denied {
			t.Errorf("%v to %s: err %v, want %q (denied %v)", c.headers, c.url, err, c.want, c.denied)
		}
		if err != nil && strings.Contains(err.Error(), "line") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

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
		HTTP:        HTTPConfig{AllowedOrigins: []string{api.URL, elsewhere.URL}},
		Credentials: CredentialsConfig{Dir: secretDir(t, map[string]string{"token": "s3cret"}), Auth: []AuthConfig{{Name: "token", Origins: []string{api.URL}, Bearer: &BearerAuth{Key: "token"}}}},
	}.withDefaults()
	store, _ := newCredentialStore(cfg.Name, cfg.Credentials)
	var err error
	if cfg.HTTP.auth, err = newModuleAuthenticator(cfg, store); err != nil {
		t.Fatal(err)
	}
	h, err := newHTTPClient(cfg.Name, cfg.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	named := []abi.Header{{Name: abi.HeaderCredential, Value: "token"}}
	if resp := h.do(context.Background(), &abi.HTTPRequest{URL: api.URL + "/moved", Headers: named}); resp.Error != "" || resp.StatusCode != 200 {
		t.Fatalf("same-origin redirect: %+v", resp)
	}
	if want := "/moved Bearer s3cret,/here Bearer s3cret"; strings.Join(seen, ",") != want {
		t.Errorf("the API saw %q, want %q", seen, want)
	}
	resp := h.do(context.Background(), &abi.HTTPRequest{URL: api.URL + "/away", Headers: named})
	if !strings.Contains(resp.Error, `credential "token" is not bound to origin `+elsewhere.URL) || elsewhereHits.Load() != 0 {
		t.Errorf("redirect to an unbound origin: %+v, %d requests reached it", resp, elsewhereHits.Load())
	}
}

// TestSigV4MatchesAWSSigner: the host's signature of a fixed request at a
// fixed time is the one aws-sdk-go-v2's signer makes of the same request,
// with the defaults and with a per-request service and region.
func TestSigV4MatchesAWSSigner(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session-token"}
	dir := secretDir(t, map[string]string{"id": creds.AccessKeyID + "\n", "secret": creds.SecretAccessKey, "session": creds.SessionToken})
	ec2 := "https://ec2.eu-central-1.amazonaws.com"
	net := &recorder{}
	rt := newAuthTransport(t, CredentialsConfig{Dir: dir, Auth: []AuthConfig{{Name: "aws", Origins: []string{ec2},
		SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "session", Region: "eu-central-1", Service: "ec2"}}}}, net)
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rt.auth.now = func() time.Time { return at }
	body := []byte("Action=DescribeInstances&Version=2016-11-15")
	for _, c := range []struct {
		name, service, region string
		headers               []string
	}{
		{"defaults", "ec2", "eu-central-1", nil},
		{"per request", "elasticloadbalancing", "eu-west-1", []string{abi.HeaderSigV4Service, "elasticloadbalancing", abi.HeaderSigV4Region, "eu-west-1"}},
	} {
		newReq := func() *http.Request {
			req, _ := http.NewRequest("POST", ec2+"/?x=1", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}
		req := newReq()
		req.Header.Set(abi.HeaderCredential, "aws")
		for i := 0; i < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := net.last()
		want := newReq()
		hash := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, want, hex.EncodeToString(hash[:]), c.service, c.region, at); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
			if got.Header.Get(h) != want.Header.Get(h) || want.Header.Get(h) == "" {
				t.Errorf("%s: %s = %q, aws-sdk-go-v2 signs %q", c.name, h, got.Header.Get(h), want.Header.Get(h))
			}
		}
		if b, _ := io.ReadAll(got.Body); !bytes.Equal(b, body) {
			t.Errorf("%s: body sent %q, want %q", c.name, b, body)
		}
	}
	noDefaults := newAuthTransport(t, CredentialsConfig{Dir: dir, Auth: []AuthConfig{{Name: "aws", Origins: []string{ec2},
		SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"}}}}, net)
	req, _ := http.NewRequest("GET", ec2+"/", nil)
	req.Header.Set(abi.HeaderCredential, "aws")
	if _, err := noDefaults.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "sigv4 needs a service and a region") {
		t.Errorf("no service or region: %v", err)
	}
}

// tokenServer is an OAuth2 token endpoint that counts the exchanges it
// answers and hands out token, valid for expiresIn seconds, to the client
// it accepts (client credentials or a service account JWT).
type tokenServer struct {
	*httptest.Server
	hits      atomic.Int32
	mu        sync.Mutex
	secret    string // the client secret accepted; "" accepts any
	token     string
	expiresIn int
	fail      bool
	grant     string // the grant_type of the last request
}

func newTokenServer(t testing.TB, token string, expiresIn int) *tokenServer {
	s := &tokenServer{token: token, expiresIn: expiresIn}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		r.ParseForm()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.grant = r.Form.Get("grant_type")
		_, secret, ok := r.BasicAuth()
		if !ok {
			secret = r.Form.Get("client_secret")
		}
		if s.fail || s.grant == "client_credentials" && s.secret != "" && secret != s.secret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": s.token, "token_type": "Bearer", "expires_in": s.expiresIn})
	}))
	t.Cleanup(s.Close)
	return s
}

// TestOAuth2TokenSharedByInstances: a pool of 4 instances under concurrent
// calls makes one token request per token lifetime, refreshed before the
// token expires.
func TestOAuth2TokenSharedByInstances(t *testing.T) {
	tokens := newTokenServer(t, "s3cret", 4) // replaced 1 s before it expires
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.PoolSize = 4
		c.Credentials.Dir = secretDir(t, map[string]string{"client-id": "ccm", "client-secret": "pw"})
		c.Credentials.Auth = []AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &OAuth2ClientCredentialsAuth{
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
	if n := tokens.hits.Load(); n != 1 || tokens.grant != "client_credentials" {
		t.Fatalf("40 calls on 4 instances made %d token requests (grant %q), want 1", n, tokens.grant)
	}
	time.Sleep(3100 * time.Millisecond)
	burst()
	if n := tokens.hits.Load(); n != 2 {
		t.Fatalf("after the refresh time, %d token requests in all, want 2", n)
	}
}

// TestOAuth2ClientSecretRotation: a rotated client secret is used at the
// next call, without waiting for the token to expire, and without restart.
func TestOAuth2ClientSecretRotation(t *testing.T) {
	tokens := newTokenServer(t, "s3cret", 3600)
	tokens.secret = "old"
	dir := secretDir(t, map[string]string{"client-id": "ccm", "client-secret": "old"})
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = dir
		c.Credentials.Auth = []AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &OAuth2ClientCredentialsAuth{
			TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}}}
	})
	call := func() error {
		return f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{})
	}
	if err := call(); err != nil || tokens.hits.Load() != 1 {
		t.Fatalf("first call: %v, %d token requests", err, tokens.hits.Load())
	}
	// The endpoint now accepts only the new secret; the old token would
	// still be valid for an hour.
	tokens.mu.Lock()
	tokens.secret = "new-secret"
	tokens.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "client-secret"), []byte("new-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call(); err != nil || tokens.hits.Load() != 2 {
		t.Fatalf("after rotating the client secret: %v, %d token requests, want a new exchange", err, tokens.hits.Load())
	}
	if err := call(); err != nil || tokens.hits.Load() != 2 {
		t.Fatalf("the new token is not reused: %v, %d token requests", err, tokens.hits.Load())
	}
}

// serviceAccountKey is a Google service account JSON key with a fresh RSA
// key, whose token_uri is tokenURL.
func serviceAccountKey(t testing.TB, tokenURL string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	b, _ := json.Marshal(map[string]string{"type": "service_account", "client_email": "ccm@project.iam.gserviceaccount.com",
		"private_key_id": "k1", "private_key": string(pemKey), "token_uri": tokenURL})
	return string(b)
}

// TestGoogleServiceAccount: the host exchanges a JWT signed with the key
// for a token, and the tokenURL setting overrides the key's token_uri.
func TestGoogleServiceAccount(t *testing.T) {
	tokens := newTokenServer(t, "s3cret", 3600)
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = secretDir(t, map[string]string{"key.json": serviceAccountKey(t, "https://oauth2.googleapis.com/token")})
		c.Credentials.Auth = []AuthConfig{{Name: "token", Origins: c.HTTP.AllowedOrigins, GoogleServiceAccount: &GoogleServiceAccountAuth{
			Key: "key.json", Scopes: []string{"https://www.googleapis.com/auth/compute"}, TokenURL: tokens.URL}}}
	})
	for range 3 {
		if err := f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: "n"}, &abi.InstanceMetadata{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := tokens.hits.Load(); n != 1 || tokens.grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		t.Fatalf("%d token requests with grant %q, want 1 JWT bearer grant", n, tokens.grant)
	}
}

// TestTokenFailures: a failed exchange and a malformed key fail the call
// with an error that says so (never "not found"), are tried again only
// after a backoff however often the module calls, and are reported once.
func TestTokenFailures(t *testing.T) {
	tokens := newTokenServer(t, "s3cret", 3600)
	tokens.fail = true
	dir := secretDir(t, map[string]string{"client-id": "ccm", "client-secret": "pw", "key.json": `{"type": "service_account", "private_key": "not a key"`})
	var reports []string
	var mu sync.Mutex
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.Credentials.Dir = dir
		c.Credentials.Auth = []AuthConfig{
			{Name: "token", Origins: c.HTTP.AllowedOrigins, OAuth2ClientCredentials: &OAuth2ClientCredentialsAuth{
				TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}},
			{Name: "absent", Origins: c.HTTP.AllowedOrigins, GoogleServiceAccount: &GoogleServiceAccountAuth{Key: "key.json", Scopes: []string{"s"}, TokenURL: tokens.URL}},
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
	if n := tokens.hits.Load(); n != 2 {
		t.Errorf("%d token requests in 1 s of calls, want the 2 of one exchange", n)
	}
	mu.Lock()
	if len(reports) != 2 || !strings.HasPrefix(reports[0], "token: ") || !strings.HasPrefix(reports[1], "absent: ") {
		t.Errorf("reports %q, want one per credential", reports)
	}
	mu.Unlock()

	tokens.mu.Lock()
	tokens.fail = false
	tokens.mu.Unlock()
	time.Sleep(tokenBackoffMin)
	if err := call("n"); err != nil {
		t.Fatalf("after the backoff, with the endpoint back: %v", err)
	}
}

// TestRefreshTime: a token is replaced a minute before it expires, or a
// quarter of its lifetime before when that is shorter; one without expiry
// is kept.
func TestRefreshTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		lifetime, want time.Duration
	}{
		{time.Hour, 59 * time.Minute},
		{2 * time.Minute, 90 * time.Second},
		{-time.Second, -time.Second},
	} {
		if got := refreshTime(now, now.Add(c.lifetime)).Sub(now); got != c.want {
			t.Errorf("lifetime %s: refreshed after %s, want %s", c.lifetime, got, c.want)
		}
	}
	if got := refreshTime(now, time.Time{}); got.Before(now.Add(100 * 365 * 24 * time.Hour)) {
		t.Errorf("a token without expiry is refreshed at %s", got)
	}
}

// BenchmarkAuthBearer is the per-request cost of naming a bearer
// credential: the reserved header consumed, the Secret file stat'ed
// (rotation), the header set.
func BenchmarkAuthBearer(b *testing.B) {
	benchmarkAuth(b, AuthConfig{Name: "c", Bearer: &BearerAuth{Key: "token"}})
}

// BenchmarkAuthSigV4 is the same for a SigV4 credential signing a request
// with a 1 KiB body.
func BenchmarkAuthSigV4(b *testing.B) {
	benchmarkAuth(b, AuthConfig{Name: "c", SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", Region: "eu-central-1", Service: "ec2"}})
}

func benchmarkAuth(b *testing.B, a AuthConfig) {
	origin := "https://api.example"
	a.Origins = []string{origin}
	dir := secretDir(b, map[string]string{"token": "s3cret", "id": "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"})
	rt := newAuthTransport(b, CredentialsConfig{Dir: dir, Auth: []AuthConfig{a}}, nil)
	req, _ := http.NewRequest("POST", origin+"/v1/instances?name=node-1", bytes.NewReader(bytes.Repeat([]byte("x"), 1024)))
	req.Header.Set(abi.HeaderCredential, "c")
	req.Header.Set("Accept", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.auth.apply(req); err != nil { // apply leaves req as it was
			b.Fatal(err)
		}
	}
}

// TestRevokedTokenReplaced: a 401 to a request that carried an OAuth2
// token drops the token, so the next request gets a new one instead of
// failing until the old one expires; a cloud that refuses every token
// costs the token endpoint at most one exchange per tokenRejectAfter.
func TestRevokedTokenReplaced(t *testing.T) {
	tokens := newTokenServer(t, "t1", 3600)
	var revoked sync.Map
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := revoked.Load(r.Header.Get("Authorization")); ok {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(api.Close)
	rt := newAuthTransport(t, CredentialsConfig{Dir: secretDir(t, map[string]string{"id": "ccm", "secret": "pw"}), Auth: []AuthConfig{
		{Name: "token", Origins: []string{api.URL}, OAuth2ClientCredentials: &OAuth2ClientCredentialsAuth{TokenURL: tokens.URL, ClientIDKey: "id", ClientSecretKey: "secret"}},
	}}, http.DefaultTransport)
	send := func() int {
		t.Helper()
		req, _ := http.NewRequest("GET", api.URL, nil)
		req.Header.Set(abi.HeaderCredential, "token")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	setToken := func(token string) {
		tokens.mu.Lock()
		tokens.token = token
		tokens.mu.Unlock()
	}

	defer func(d time.Duration) { tokenRejectAfter = d }(tokenRejectAfter)
	tokenRejectAfter = 0
	if code := send(); code != 200 || tokens.hits.Load() != 1 {
		t.Fatalf("first request: %d, %d token requests", code, tokens.hits.Load())
	}
	revoked.Store("Bearer t1", true)
	setToken("t2")
	if code := send(); code != http.StatusUnauthorized {
		t.Fatalf("request with the revoked token: %d, want 401", code)
	}
	if code := send(); code != 200 || tokens.hits.Load() != 2 {
		t.Fatalf("next request: %d with %d token requests; want 200 with a new token", code, tokens.hits.Load())
	}

	// Every token refused: the young token is kept, not exchanged at
	// every request.
	tokenRejectAfter = time.Hour
	revoked.Store("Bearer t2", true)
	setToken("t3")
	for range 5 {
		if code := send(); code != http.StatusUnauthorized {
			t.Fatalf("%d, want 401", code)
		}
	}
	if n := tokens.hits.Load(); n != 2 {
		t.Fatalf("%d token requests after five 401s to a token younger than tokenRejectAfter, want 2", n)
	}
}
