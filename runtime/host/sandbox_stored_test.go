package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// auditServer is an origin that keeps every request it receives, request
// line and headers, starting with seed (requests another process sent),
// and answers GET /audit with all of them; any other request gets 200.
func auditServer(t *testing.T, seed ...string) *httptest.Server {
	var mu sync.Mutex
	kept := strings.Join(seed, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/audit" {
			w.Write([]byte(kept))
			return
		}
		var dump bytes.Buffer
		fmt.Fprintf(&dump, "%s %s\n", r.Method, r.RequestURI)
		r.Header.Write(&dump)
		kept += dump.String()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStoredCredentialsRedacted: an origin that keeps the requests it
// received and returns them later hands no module a secret of the
// process, whoever sent it: another process (the values are the Secret's,
// known before any request), the module generation in service (a rollout
// candidate or the generation after a restart reads it first), the module
// itself before two rotations of its Secret, or another module of the
// process, which has no credentials at all.
func TestStoredCredentialsRedacted(t *testing.T) {
	type client struct {
		module string
		creds  func(dir string, origins []string) credentials.Config
	}
	var (
		// Every case has its own values: known to the process only
		// through that case.
		header = func(dir string, origins []string) credentials.Config {
			return credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
				{Name: "header", Origins: origins, Header: &credentials.HeaderAuth{Name: "X-Auth-Token", Key: "apikey"}},
				{Name: "sigv4", Origins: origins, SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "session",
					Region: "eu-central-1", Service: "ec2"}},
				{Name: "bearer", Origins: origins, Bearer: &credentials.BearerAuth{Key: "token"}},
			}}
		}
		none = func(string, []string) credentials.Config { return credentials.Config{} }
	)
	cases := []struct {
		name    string
		secrets map[string]string
		// seed is what another process sent, kept by the origin.
		seed func(secrets map[string]string) string
		// oauth2 is the access token the token endpoint hands out, when
		// the case has an oauth2 credential.
		oauth2 string
		// senders send one request with each of their credentials,
		// rotate lists the values "token" is rotated to after each
		// round, then reader reads the audit first thing.
		senders []client
		rotate  []string
		reader  client
		want    func(secrets map[string]string) []string
	}{
		{
			name: "another process sent them",
			secrets: map[string]string{"apikey": "stored-process-api-key-5e1f", "session": "stored-process-session-token-77aa",
				"id": "AKIDSTOREDPROCESS", "secret": "stored-process-secret-access-key", "token": "stored-process-bearer-9c2d"},
			seed: func(s map[string]string) string {
				return "GET /servers\nAuthorization: Bearer " + s["token"] + "\nX-Auth-Token: " + s["apikey"] +
					"\nX-Amz-Security-Token: " + s["session"] + "\n"
			},
			reader: client{"stored-new-process", header},
			want:   func(s map[string]string) []string { return []string{s["apikey"], s["session"], s["token"]} },
		},
		{
			name: "the generation in service sent them, a candidate reads",
			secrets: map[string]string{"apikey": "stored-generation-api-key-4d0e", "session": "stored-generation-session-token-66bb",
				"id": "AKIDSTOREDGENERATION", "secret": "stored-generation-secret-access-key", "token": "stored-generation-bearer-8b1c",
				"client-id": "ccm", "client-secret": "stored-generation-client-secret"},
			oauth2:  "stored-generation-oauth2-access-token-3a9f",
			senders: []client{{"stored-generation", header}},
			reader:  client{"stored-generation", header},
			want: func(s map[string]string) []string {
				return []string{s["apikey"], s["session"], s["token"], "stored-generation-oauth2-access-token-3a9f"}
			},
		},
		{
			name: "two rotations ago",
			secrets: map[string]string{"apikey": "stored-rotation-api-key-3c9d", "session": "stored-rotation-session-token-55cc",
				"id": "AKIDSTOREDROTATION", "secret": "stored-rotation-secret-access-key", "token": "stored-rotation-bearer-first-7a0b"},
			senders: []client{{"stored-rotation", header}},
			rotate:  []string{"stored-rotation-bearer-second-6f9a", "stored-rotation-bearer-third-5e8f"},
			reader:  client{"stored-rotation", header},
			want: func(map[string]string) []string {
				return []string{"stored-rotation-bearer-first-7a0b", "stored-rotation-bearer-second-6f9a", "stored-rotation-bearer-third-5e8f"}
			},
		},
		{
			name: "another module, without credentials, reads",
			secrets: map[string]string{"apikey": "stored-module-api-key-2b8c", "session": "stored-module-session-token-44dd",
				"id": "AKIDSTOREDMODULE", "secret": "stored-module-secret-access-key", "token": "stored-module-bearer-6e7f",
				"client-id": "ccm", "client-secret": "stored-module-client-secret"},
			oauth2:  "stored-module-oauth2-access-token-2b8e",
			senders: []client{{"stored-module-x", header}},
			reader:  client{"stored-module-y", none},
			want: func(s map[string]string) []string {
				return []string{s["apikey"], s["session"], s["token"], "stored-module-oauth2-access-token-2b8e"}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seed string
			if tc.seed != nil {
				seed = tc.seed(tc.secrets)
			}
			audit := auditServer(t, seed)
			origins := []string{audit.URL}
			dir := credentialstest.SecretDir(t, tc.secrets)
			credsOf := func(c client) credentials.Config {
				cfg := c.creds(dir, origins)
				if tc.oauth2 != "" && len(cfg.Auth) > 0 {
					tokens := credentialstest.NewTokenServer(t, tc.oauth2, 3600)
					cfg.Auth = append(cfg.Auth, credentials.AuthConfig{Name: "oauth2", Origins: origins,
						OAuth2ClientCredentials: &credentials.OAuth2ClientCredentialsAuth{TokenURL: tokens.URL, ClientIDKey: "client-id", ClientSecretKey: "client-secret"}})
				}
				return cfg
			}
			for _, sender := range tc.senders {
				cfg := credsOf(sender)
				h := moduleClient(t, sender.module, cfg, audit.URL)
				for round := range len(tc.rotate) + 1 {
					for _, c := range cfg.Auth {
						resp := answer(context.Background(), h, &abi.HTTPRequest{URL: audit.URL + "/servers",
							Headers: []abi.Header{{Name: abi.HeaderCredential, Value: c.Name}}})
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("%s with %s: %+v", sender.module, c.Name, resp)
						}
					}
					if round < len(tc.rotate) {
						credentialstest.RotateSecret(t, dir, "token", tc.rotate[round])
					}
				}
			}
			// Made as the host makes a module generation: its client, and
			// thus its authenticator, are new.
			reader := moduleClient(t, tc.reader.module, credsOf(tc.reader), audit.URL)
			resp := answer(context.Background(), reader, &abi.HTTPRequest{URL: audit.URL + "/audit"})
			if resp.StatusCode != http.StatusOK || !bytes.Contains(resp.Body, []byte("GET /servers")) {
				t.Fatalf("the audit did not come back: %+v", resp)
			}
			if leak := credentialstest.Reflection(resp, tc.want(tc.secrets)); leak != "" {
				t.Errorf("the module read %s:\n%s", leak, resp.Body)
			}
		})
	}
}

// TestHostileModuleLogsStoredCredentials: a module that reads what an
// origin kept of another module's requests, and logs it and returns it,
// puts no secret in the host's log or in what it answers.
func TestHostileModuleLogsStoredCredentials(t *testing.T) {
	const apikey = "stored-log-api-key-1a7b"
	audit := auditServer(t)
	dir := credentialstest.SecretDir(t, map[string]string{"apikey": apikey})
	sender := moduleClient(t, "stored-log-sender", credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
		{Name: "header", Origins: []string{audit.URL}, Header: &credentials.HeaderAuth{Name: "X-Auth-Token", Key: "apikey"}}}}, audit.URL)
	if resp := answer(context.Background(), sender, &abi.HTTPRequest{URL: audit.URL + "/servers",
		Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "header"}}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("sending: %+v", resp)
	}
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			var mu sync.Mutex
			var logged []string
			mod, err := New(context.Background(), guestWasm(t, "leaker", tc), Config{Name: "stored-log-" + string(tc),
				ProviderConfig: []byte(audit.URL), CallTimeout: 5 * time.Second, HTTP: egress.Config{AllowedOrigins: []string{audit.URL}},
				Log: func(_ abi.LogLevel, msg string) { mu.Lock(); logged = append(logged, msg); mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(context.Background())
			var status abi.GetLoadBalancerResult
			if err := mod.Call(context.Background(), abi.ExportGetLoadBalancer, &abi.LoadBalancerRequest{Service: abi.Service{Name: "web"}}, &status); err != nil {
				t.Fatal(err)
			}
			answered, _ := json.Marshal(status)
			mu.Lock()
			said := strings.Join(logged, "\n") + "\n" + string(answered)
			mu.Unlock()
			if !strings.Contains(said, "audit: GET /servers") {
				t.Fatalf("the module did not log the audit:\n%s", said)
			}
			if leak := credentialstest.Reflection(&abi.HTTPResponse{Body: []byte(said)}, []string{apikey}); leak != "" {
				t.Errorf("the log or the answer holds %s:\n%s", leak, said)
			}
		})
	}
}
