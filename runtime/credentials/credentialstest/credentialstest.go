// Package credentialstest provides what tests of credentials need: a
// Secret volume (SecretDir) and its rotation by the kubelet
// (RotateSecret), an OAuth2 token endpoint (TokenServer), a Google
// service account key (ServiceAccountKey), and a search of what a module
// got for the secrets sent on its behalf (Reflection).
package credentialstest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
)

// SecretDir writes Secret keys into a fresh directory.
func SecretDir(t testing.TB, keys map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// RotateSecret sets key to value in the Secret volume dir as the kubelet
// rotates a Secret: it writes a new timestamped directory, swaps the
// ..data symlink to it, and the key's own symlink points through ..data.
func RotateSecret(t testing.TB, dir, key, value string) {
	t.Helper()
	ts := filepath.Join(dir, "..ts-"+value)
	os.MkdirAll(ts, 0o755)
	os.WriteFile(filepath.Join(ts, key), []byte(value), 0o600)
	os.Remove(filepath.Join(dir, "..data.tmp"))
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data.tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, key))
	os.Symlink("..data/"+key, filepath.Join(dir, key))
}

// TokenServer is an OAuth2 token endpoint that counts the exchanges it
// answers and hands out Token, valid for ExpiresIn seconds, to the client
// it accepts (client credentials or a service account JWT).
type TokenServer struct {
	*httptest.Server
	Hits atomic.Int32

	// Mu guards the fields below, which a test may change while the
	// server runs.
	Mu        sync.Mutex
	Secret    string // the client secret accepted; "" accepts any
	Token     string
	ExpiresIn int
	Fail      bool
	Grant     string // the grant_type of the last request
}

// NewTokenServer starts a TokenServer, closed when the test ends.
func NewTokenServer(t testing.TB, token string, expiresIn int) *TokenServer {
	s := &TokenServer{Token: token, ExpiresIn: expiresIn}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Hits.Add(1)
		r.ParseForm()
		s.Mu.Lock()
		defer s.Mu.Unlock()
		s.Grant = r.Form.Get("grant_type")
		_, secret, ok := r.BasicAuth()
		if !ok {
			secret = r.Form.Get("client_secret")
		}
		if s.Fail || s.Grant == "client_credentials" && s.Secret != "" && secret != s.Secret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": s.Token, "token_type": "Bearer", "expires_in": s.ExpiresIn})
	}))
	t.Cleanup(s.Close)
	return s
}

// ServiceAccountKey is a Google service account JSON key with a fresh RSA
// key, whose token_uri is tokenURL.
func ServiceAccountKey(t testing.TB, tokenURL string) string {
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

// reflectedForms are the ways a server may return secret, written here
// apart from the credentials package's own list: raw, hex, percent-encoded, and base64
// (standard and URL-safe, padded or not, alone or inside a longer encoded
// text at any of the three alignments).
func reflectedForms(secret string) []string {
	forms := []string{secret, hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret))),
		url.QueryEscape(secret), url.PathEscape(secret)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(secret)))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for offset := 1; offset < 3; offset++ {
			s := enc.EncodeToString([]byte(strings.Repeat("\x00", offset) + secret))
			forms = append(forms, s[3:len(s)-1]) // the characters made of the secret's bits only
		}
	}
	return forms
}

// Reflection returns the first form of a secret found in what the module
// got, or "". Header names are compared in lower case: the HTTP client
// canonicalises them.
func Reflection(resp *abi.HTTPResponse, secrets []string) string {
	var text, names strings.Builder
	text.Write(resp.Body)
	text.WriteString(resp.Error)
	for _, h := range resp.Headers {
		text.WriteString("\n" + h.Value)
		names.WriteString("\n" + strings.ToLower(h.Name))
	}
	for _, secret := range secrets {
		for _, form := range reflectedForms(secret) {
			if strings.Contains(text.String(), form) || strings.Contains(names.String(), strings.ToLower(form)) {
				return fmt.Sprintf("%q as %q", secret, form)
			}
		}
	}
	return ""
}
