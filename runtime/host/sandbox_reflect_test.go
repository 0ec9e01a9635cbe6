package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// echoServer is an origin that answers every request with itself: the
// request line, headers and body in the response body, each header value
// again in every encoding, the whole again in base64, and the credential
// headers in response header values and names. /last answers the
// previous request instead; /status puts the last word of the
// Authorization header, or the X-Auth-Token, in the status line. Bodies
// are compressed for a client that accepts gzip.
func echoServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	var last []byte
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var w io.Writer = rw
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && r.URL.Path != "/status" {
			rw.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(rw)
			defer gz.Close()
			w = gz
		}
		var dump bytes.Buffer
		fmt.Fprintf(&dump, "%s %s %s\n", r.Method, r.RequestURI, r.Proto)
		r.Header.Write(&dump)
		body, _ := io.ReadAll(r.Body)
		dump.Write(body)
		mu.Lock()
		previous := last
		last = dump.Bytes()
		mu.Unlock()
		credential := r.Header.Get("X-Auth-Token")
		if fields := strings.Fields(r.Header.Get("Authorization")); len(fields) > 0 {
			credential = fields[len(fields)-1]
		}
		switch r.URL.Path {
		case "/last":
			w.Write(previous)
			return
		case "/status":
			conn, buf, _ := rw.(http.Hijacker).Hijack()
			defer conn.Close()
			fmt.Fprintf(buf, "HTTP/1.1 %s OK\r\nContent-Length: 0\r\n\r\n", credential)
			buf.Flush()
			return
		}
		for _, name := range []string{"Authorization", "X-Auth-Token", "X-Amz-Security-Token"} {
			if v := r.Header.Get(name); v != "" {
				rw.Header().Set("X-Echo-"+name, v)
				rw.Header().Set("X-"+strings.Map(func(r rune) rune {
					if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' {
						return r
					}
					return -1
				}, credential), "1")
			}
		}
		w.Write(dump.Bytes())
		for _, values := range r.Header {
			for _, v := range values {
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
					fmt.Fprintf(w, "\n%s", enc.EncodeToString([]byte(v)))
				}
				fmt.Fprintf(w, "\n%x\n%X\n%s\n%s", v, v, url.QueryEscape(v), url.PathEscape(v))
			}
		}
		fmt.Fprintf(w, "\n%s\n", base64.StdEncoding.EncodeToString(dump.Bytes()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// reflectClient is the HTTP client of a module allowed to reach origins,
// with creds applied as the host applies them.
func reflectClient(t *testing.T, creds credentials.Config, origins ...string) *egress.Client {
	t.Helper()
	return moduleClient(t, "reflect-"+t.Name(), creds, origins...)
}

// moduleClient is reflectClient for the module named module, one of
// several in a test.
func moduleClient(t *testing.T, module string, creds credentials.Config, origins ...string) *egress.Client {
	t.Helper()
	cfg := Config{Name: module, HTTP: egress.Config{AllowedOrigins: origins}, Credentials: creds}.withDefaults()
	store, err := credentials.NewStore(cfg.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newEgressClient(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestEchoedCredentialsRedacted: against an origin that echoes its
// requests, in the body, the header values and names, the status line and
// in every common encoding, no secret the host sent with any scheme
// reaches the module: not in the answer to the request that carried it,
// nor in a later answer to a request that named no credential. A secret
// too short to look for alone is still found in what was sent with it;
// alone, in the module's own text, it is left as it is.
func TestEchoedCredentialsRedacted(t *testing.T) {
	echo := echoServer(t)
	oauth2Tokens := credentialstest.NewTokenServer(t, "oauth2-access-token-1f2e3d4c5b6a", 3600)
	googleTokens := credentialstest.NewTokenServer(t, "google-access-token-a6b5c4d3e2f1", 3600)
	secrets := map[string]string{
		"token": "bearer-token-0123456789abcdef", "short": "s3cret",
		"user": "alice", "password": "correct+horse/battery=staple", "short-password": "pw",
		"apikey": "api-key-fedcba9876543210",
		"id":     "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session": "FQoGZXIvYXdzEBYaDSessionToken0123456789",
		"client-id": "ccm", "client-secret": "client-secret-value-42",
		"key.json": credentialstest.ServiceAccountKey(t, googleTokens.URL),
	}
	origins := []string{echo.URL}
	h := reflectClient(t, credentials.Config{Dir: credentialstest.SecretDir(t, secrets), Auth: []credentials.AuthConfig{
		{Name: "bearer", Origins: origins, Bearer: &credentials.BearerAuth{Key: "token"}},
		{Name: "short-bearer", Origins: origins, Bearer: &credentials.BearerAuth{Key: "short"}},
		{Name: "basic", Origins: origins, Basic: &credentials.BasicAuth{UsernameKey: "user", PasswordKey: "password"}},
		{Name: "short-basic", Origins: origins, Basic: &credentials.BasicAuth{UsernameKey: "user", PasswordKey: "short-password"}},
		{Name: "header", Origins: origins, Header: &credentials.HeaderAuth{Name: "X-Auth-Token", Key: "apikey"}},
		{Name: "sigv4", Origins: origins, SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "session",
			Region: "eu-central-1", Service: "ec2"}},
		{Name: "oauth2", Origins: origins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{TokenURL: oauth2Tokens.URL,
			ClientIDKey: "client-id", ClientSecretKey: "client-secret"}},
		{Name: "google", Origins: origins, GoogleServiceAccount: &credentials.GoogleServiceAccountAuth{Key: "key.json", Scopes: []string{"compute"}}},
	}}, echo.URL)
	basic := func(user, password string) string {
		return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	}
	sent := map[string][]string{
		"bearer":       {secrets["token"]},
		"short-bearer": {"Bearer " + secrets["short"]},
		"basic":        {secrets["password"], basic("alice", secrets["password"])},
		"short-basic":  {"alice:pw", basic("alice", "pw")},
		"header":       {secrets["apikey"]},
		"sigv4":        {secrets["session"], secrets["secret"]},
		"oauth2":       {"oauth2-access-token-1f2e3d4c5b6a", secrets["client-secret"]},
		"google":       {"google-access-token-a6b5c4d3e2f1"},
	}
	var all []string
	for _, credential := range slices.Sorted(maps.Keys(sent)) {
		all = append(all, sent[credential]...)
		named := []abi.Header{{Name: abi.HeaderCredential, Value: credential}}
		resp := answer(context.Background(), h, &abi.HTTPRequest{Method: "POST", URL: echo.URL + "/echo", Headers: named, Body: []byte("module body")})
		if resp.Error != "" || resp.StatusCode != 200 || !bytes.Contains(resp.Body, []byte("POST /echo HTTP/1.1\n")) ||
			!bytes.Contains(resp.Body, []byte("module body")) || !bytes.Contains(resp.Body, []byte("********")) {
			t.Fatalf("%s: the echo did not come back, redacted: %+v", credential, resp)
		}
		if leak := credentialstest.Reflection(resp, sent[credential]); leak != "" {
			t.Errorf("%s: the module got %s:\n%s", credential, leak, resp.Body)
		}
		status := answer(context.Background(), h, &abi.HTTPRequest{URL: echo.URL + "/status", Headers: named})
		if leak := credentialstest.Reflection(status, sent[credential]); leak != "" || !strings.Contains(status.Error, "malformed HTTP status code") {
			t.Errorf("%s: a status line holding the credential: error %q (%s)", credential, status.Error, leak)
		}
	}
	// A later answer to a request that names no credential quotes the
	// last one that did.
	answer(context.Background(), h, &abi.HTTPRequest{URL: echo.URL + "/echo", Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "bearer"}}})
	resp := answer(context.Background(), h, &abi.HTTPRequest{URL: echo.URL + "/last"})
	if leak := credentialstest.Reflection(resp, all); leak != "" || !bytes.Contains(resp.Body, []byte("Bearer *****")) {
		t.Errorf("another request's echo: %s:\n%s", leak, resp.Body)
	}
	// Too short to be looked for alone: the module's own "s3cret" and
	// "pw" come back untouched.
	resp = answer(context.Background(), h, &abi.HTTPRequest{Method: "POST", URL: echo.URL + "/echo", Body: []byte("s3cret pw")})
	if !bytes.Contains(resp.Body, []byte("\ns3cret pw")) {
		t.Errorf("short values are redacted in the module's own text:\n%s", resp.Body)
	}
}

// TestForbiddenMethodsRefused: TRACE, TRACK and CONNECT, in any case, with
// or without a credential, are refused with an error that says so, and
// never reach the origin.
func TestForbiddenMethodsRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	h := reflectClient(t, credentials.Config{Dir: credentialstest.SecretDir(t, map[string]string{"token": "bearer-token-0123456789abcdef"}), Auth: []credentials.AuthConfig{
		{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}}, srv.URL)
	for _, method := range []string{"TRACE", "trace", "Track", "CONNECT", "connect"} {
		for _, headers := range [][]abi.Header{nil, {{Name: abi.HeaderCredential, Value: "token"}}} {
			resp := answer(context.Background(), h, &abi.HTTPRequest{Method: method, URL: srv.URL + "/", Headers: headers})
			if want := "denied: method " + method + " is forbidden"; resp.Error != want {
				t.Errorf("%s %v: %+v, want the error %q", method, headers, resp, want)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d forbidden requests reached the origin", n)
	}
	if resp := answer(context.Background(), h, &abi.HTTPRequest{Method: "OPTIONS", URL: srv.URL + "/"}); resp.Error != "" || hits.Load() != 1 {
		t.Errorf("OPTIONS: %+v, %d requests reached the origin", resp, hits.Load())
	}
}

// TestCompressedEchoRefused: a module that asks for a compressed answer,
// which the host's search could not read, gets an error instead of the
// echo; the host's own negotiation of gzip, decompressed by the client,
// is searched as usual.
func TestCompressedEchoRefused(t *testing.T) {
	const token = "bearer-token-0123456789abcdef"
	echo := echoServer(t)
	h := reflectClient(t, credentials.Config{Dir: credentialstest.SecretDir(t, map[string]string{"token": token}), Auth: []credentials.AuthConfig{
		{Name: "token", Origins: []string{echo.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}}, echo.URL)
	named := []abi.Header{{Name: abi.HeaderCredential, Value: "token"}}
	resp := answer(context.Background(), h, &abi.HTTPRequest{URL: echo.URL + "/echo", Headers: append(named, abi.Header{Name: "Accept-Encoding", Value: "gzip"})})
	if !strings.HasPrefix(resp.Error, "denied: the response is compressed") || len(resp.Body) != 0 || len(resp.Headers) != 0 {
		t.Errorf("a compressed echo: %+v", resp)
	}
	resp = answer(context.Background(), h, &abi.HTTPRequest{URL: echo.URL + "/echo", Headers: named})
	if leak := credentialstest.Reflection(resp, []string{token}); leak != "" || !bytes.Contains(resp.Body, []byte("Accept-Encoding: gzip")) {
		t.Errorf("gzip negotiated by the host: %s:\n%s", leak, resp.Body)
	}
}

// lockedBuffer collects klog's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTokenEndpointErrorBodyHidden: a token endpoint that refuses the
// exchange and quotes the request in its answer (the client secret, the
// service account's signed assertion), as a JSON error description or as a
// page, is told of by its status and error code alone, in the module's
// error, the host's log and the failure report the Events are made of.
func TestTokenEndpointErrorBodyHidden(t *testing.T) {
	const clientSecret = "client-secret-value-42"
	var asJSON atomic.Bool
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		quoted := r.Header.Get("Authorization") + " " + string(body)
		w.Header().Set("X-Echo", quoted)
		if asJSON.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "bad client: " + quoted,
				"error_uri": "https://docs.example/" + url.PathEscape(quoted)})
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "<pre>%s</pre>", quoted)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer api.Close()

	var log lockedBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&log)
	defer klog.LogToStderr(true)
	var mu sync.Mutex
	var reports []string
	origins := []string{api.URL}
	h := reflectClient(t, credentials.Config{
		Dir: credentialstest.SecretDir(t, map[string]string{"client-id": "ccm", "client-secret": clientSecret, "key.json": credentialstest.ServiceAccountKey(t, tokens.URL)}),
		Auth: []credentials.AuthConfig{
			{Name: "oauth2", Origins: origins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{TokenURL: tokens.URL,
				ClientIDKey: "client-id", ClientSecretKey: "client-secret"}},
			{Name: "oauth2-page", Origins: origins, OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{TokenURL: tokens.URL,
				ClientIDKey: "client-id", ClientSecretKey: "client-secret"}},
			{Name: "google", Origins: origins, GoogleServiceAccount: &credentials.GoogleServiceAccountAuth{Key: "key.json", Scopes: []string{"compute"}}},
		},
		OnAuthFailure: func(credential string, err error) {
			mu.Lock()
			reports = append(reports, credential+": "+err.Error())
			mu.Unlock()
		},
	}, api.URL)
	for _, c := range []struct {
		credential string
		json       bool
		want       string
	}{
		{"oauth2", true, `credential "oauth2": token exchange with ` + tokens.URL + ": the token endpoint answered 401 invalid_client"},
		{"oauth2-page", false, `credential "oauth2-page": token exchange with ` + tokens.URL + ": the token endpoint answered 401"},
		{"google", false, `credential "google": token exchange with ` + tokens.URL + ": the token endpoint answered 401"},
	} {
		asJSON.Store(c.json)
		resp := answer(context.Background(), h, &abi.HTTPRequest{URL: api.URL + "/", Headers: []abi.Header{{Name: abi.HeaderCredential, Value: c.credential}}})
		if !strings.Contains(resp.Error, c.want) {
			t.Errorf("%s: the module got %q, want %q", c.credential, resp.Error, c.want)
		}
		mu.Lock()
		said := resp.Error + "\n" + strings.Join(reports, "\n") + "\n" + log.String()
		mu.Unlock()
		if leak := credentialstest.Reflection(&abi.HTTPResponse{Error: said}, []string{clientSecret}); leak != "" {
			t.Errorf("%s: the client secret got out, %s:\n%s", c.credential, leak, said)
		}
		// Whatever the endpoint quoted: the form, the assertion, the
		// Basic header.
		for _, quoted := range []string{"grant_type", "assertion", "Basic ", "bad client", "docs.example", "<pre>"} {
			if strings.Contains(said, quoted) {
				t.Errorf("%s: the token endpoint's answer got out (%q):\n%s", c.credential, quoted, said)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 3 {
		t.Errorf("reports %q, want one per credential", reports)
	}
	if !strings.Contains(log.String(), `credential="oauth2"`) {
		t.Errorf("the failure was not logged:\n%s", log.String())
	}
}

// answer performs req through h and returns what the module gets.
func answer(ctx context.Context, h *egress.Client, req *abi.HTTPRequest) *abi.HTTPResponse {
	resp, _ := h.Do(ctx, req)
	return resp
}
