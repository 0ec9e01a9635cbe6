package credentials

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

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

func newAuthTransport(t testing.TB, cfg Config, next http.RoundTripper) *transport {
	t.Helper()
	rt, err := NewTransport("test", cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	return rt.(*transport)
}

// TestAuthSchemes: each static scheme sets what it should and nothing the
// module sent in the reserved headers reaches the network; every misuse is
// refused before anything is sent.
func TestAuthSchemes(t *testing.T) {
	dir := credentialstest.SecretDir(t, map[string]string{"token": "s3cret\n", "user": "alice", "password": "pw", "apikey": "k3y", "bad": "line\r\nX-Evil: 1"})
	api := "https://api.example"
	net := &recorder{}
	rt := newAuthTransport(t, Config{Dir: dir, Auth: []AuthConfig{
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
			if reservedHeader(name) {
				t.Errorf("%s: reserved header %s reached the network", c.credential, name)
			}
		}
	}
	if got, err := send(api+"/v1/x", "Authorization", "Bearer mine"); err != nil || got.Header.Get("Authorization") != "Bearer mine" {
		t.Errorf("a request naming no credential is sent as the module wrote it: %v %v", got, err)
	}
	// The read-only mark (ABI revision 5) is the coalescing's, in the wasm
	// host; a native run, which has none, removes it.
	for _, headers := range [][]string{{abi.HeaderReadOnly, abi.ReadOnlyValue}, {abi.HeaderReadOnly, abi.ReadOnlyValue, abi.HeaderCredential, "bearer"}} {
		got, err := send(api+"/v1/x", headers...)
		if err != nil {
			t.Fatalf("%v: %v", headers, err)
		}
		if got.Header.Get(abi.HeaderReadOnly) != "" || len(headers) > 2 && got.Header.Get("Authorization") != "Bearer s3cret" {
			t.Errorf("%v: sent with headers %v; want no %s, and the credential applied", headers, got.Header, abi.HeaderReadOnly)
		}
	}
	// On a method no API reads with, refused unsent, as the wasm host
	// refuses it.
	for _, method := range []string{"DELETE", "PUT", "PATCH", "OPTIONS"} {
		req, _ := http.NewRequest(method, api+"/v1/x", nil)
		req.Header.Set(abi.HeaderReadOnly, abi.ReadOnlyValue)
		before := len(net.reqs)
		_, err := rt.RoundTrip(req)
		var denied *DeniedError
		if want := "header Wasmccm-Read-Only is for a POST or QUERY, not " + method; !errors.As(err, &denied) || !strings.Contains(err.Error(), want) || len(net.reqs) != before {
			t.Errorf("a marked %s: %v, %d sent; want it refused unsent: %s", method, err, len(net.reqs)-before, want)
		}
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
		{api + "/", []string{abi.HeaderReadOnly, "yes"}, `header Wasmccm-Read-Only must be "true"`, true},
		{api + "/", []string{abi.HeaderSigV4Region, "eu-west-1"}, "need Wasmccm-Credential", true},
		{api + "/", []string{abi.HeaderCredential, "bearer", abi.HeaderSigV4Service, "ec2"}, "is not a sigv4 credential", true},
		{api + "/", []string{abi.HeaderCredential, "missing"}, `credential "missing": key "absent" is not in the credentials directory`, false},
		{api + "/", []string{abi.HeaderCredential, "malformed"}, `credential "malformed": key "bad" contains a control character`, false},
	} {
		_, err := send(c.url, c.headers...)
		var denied *DeniedError
		var authErr *AuthError
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &denied) != c.denied || errors.As(err, &authErr) == c.denied {
			t.Errorf("%v to %s: err %v, want %q (denied %v)", c.headers, c.url, err, c.want, c.denied)
		}
		if err != nil && strings.Contains(err.Error(), "line") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// TestSigV4MatchesAWSSigner: the host's signature of a fixed request at a
// fixed time is the one aws-sdk-go-v2's signer makes of the same request,
// with the defaults and with a per-request service and region.
func TestSigV4MatchesAWSSigner(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session-token"}
	dir := credentialstest.SecretDir(t, map[string]string{"id": creds.AccessKeyID + "\n", "secret": creds.SecretAccessKey, "session": creds.SessionToken})
	ec2 := "https://ec2.eu-central-1.amazonaws.com"
	net := &recorder{}
	rt := newAuthTransport(t, Config{Dir: dir, Auth: []AuthConfig{{Name: "aws", Origins: []string{ec2},
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
	noDefaults := newAuthTransport(t, Config{Dir: dir, Auth: []AuthConfig{{Name: "aws", Origins: []string{ec2},
		SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"}}}}, net)
	req, _ := http.NewRequest("GET", ec2+"/", nil)
	req.Header.Set(abi.HeaderCredential, "aws")
	if _, err := noDefaults.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "sigv4 needs a service and a region") {
		t.Errorf("no service or region: %v", err)
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
	dir := credentialstest.SecretDir(b, map[string]string{"token": "s3cret", "id": "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"})
	rt := newAuthTransport(b, Config{Dir: dir, Auth: []AuthConfig{a}}, nil)
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
	tokens := credentialstest.NewTokenServer(t, "t1", 3600)
	var revoked sync.Map
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := revoked.Load(r.Header.Get("Authorization")); ok {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(api.Close)
	rt := newAuthTransport(t, Config{Dir: credentialstest.SecretDir(t, map[string]string{"id": "ccm", "secret": "pw"}), Auth: []AuthConfig{
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
		tokens.Mu.Lock()
		tokens.Token = token
		tokens.Mu.Unlock()
	}

	defer func(d time.Duration) { tokenRejectAfter = d }(tokenRejectAfter)
	tokenRejectAfter = 0
	if code := send(); code != 200 || tokens.Hits.Load() != 1 {
		t.Fatalf("first request: %d, %d token requests", code, tokens.Hits.Load())
	}
	revoked.Store("Bearer t1", true)
	setToken("t2")
	if code := send(); code != http.StatusUnauthorized {
		t.Fatalf("request with the revoked token: %d, want 401", code)
	}
	if code := send(); code != 200 || tokens.Hits.Load() != 2 {
		t.Fatalf("next request: %d with %d token requests; want 200 with a new token", code, tokens.Hits.Load())
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
	if n := tokens.Hits.Load(); n != 2 {
		t.Fatalf("%d token requests after five 401s to a token younger than tokenRejectAfter, want 2", n)
	}
}

// TestSigV4KeysNotShared: two modules with the same access key ID and
// different secrets sign differently. The AWS signer caches derived keys
// by access key ID, so one shared signer would sign for the second with
// the first's secret.
func TestSigV4KeysNotShared(t *testing.T) {
	ec2 := "https://ec2.eu-central-1.amazonaws.com"
	sign := func(secret string) string {
		dir := credentialstest.SecretDir(t, map[string]string{"id": "AKIDEXAMPLE", "secret": secret})
		net := &recorder{}
		rt := newAuthTransport(t, Config{Dir: dir, Auth: []AuthConfig{{Name: "aws", Origins: []string{ec2},
			SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", Region: "eu-central-1", Service: "ec2"}}}}, net)
		rt.auth.now = func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) }
		req, _ := http.NewRequest("GET", ec2+"/", nil)
		req.Header.Set(abi.HeaderCredential, "aws")
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		return net.last().Header.Get("Authorization")
	}
	if a, b := sign("first-secret-access-key"), sign("second-secret-access-key"); a == b {
		t.Errorf("both secrets sign %q", a)
	}
}
