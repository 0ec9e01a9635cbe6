package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

// TestRedactFindsEveryOffset: a secret inside a longer text, at any
// offset, is found in that text raw or encoded whole, and nothing made of
// its bits alone is left.
func TestRedactFindsEveryOffset(t *testing.T) {
	const secret = "bearer-token-0123456789abcdef"
	s := newKnownSecrets()
	s.add(time.Time{}, secret)
	for before := range 9 {
		for after := range 5 {
			plain := []byte(strings.Repeat(".", before) + secret + strings.Repeat(".", after))
			texts := []string{string(plain), hex.EncodeToString(plain), strings.ToUpper(hex.EncodeToString(plain)),
				url.QueryEscape(string(plain)), url.PathEscape(string(plain))}
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
				texts = append(texts, enc.EncodeToString(plain))
			}
			for _, text := range texts {
				resp := &abi.HTTPResponse{Body: []byte("<" + text + ">")}
				s.redact(resp)
				if leak := credentialstest.Reflection(resp, []string{secret}); leak != "" || !bytes.Contains(resp.Body, []byte("********")) {
					t.Fatalf("%q redacted to %q: %s", text, resp.Body, leak)
				}
			}
		}
	}
}

// TestKnownSecrets: every value added is looked for until it is
// forgotten, whoever added it: every rotation while the process lives, a
// token until an hour after it expired, and, past the bound, the oldest
// values first.
func TestKnownSecrets(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	secret := func(i int) string { return fmt.Sprintf("rotated-secret-%02d-0123456789", i) }
	cases := []struct {
		name string
		// add fills s, its clock at now unless it moves it; forgotten
		// and kept are then checked at now+later.
		add             func(s *knownSecrets)
		later           time.Duration
		forgotten, kept []string
		maxBytes        int
	}{
		{name: "every rotation kept", add: func(s *knownSecrets) {
			for i := range 20 {
				s.add(time.Time{}, secret(i), "Bearer "+secret(i))
			}
		}, later: 365 * 24 * time.Hour, kept: []string{secret(0), secret(1), secret(19)}},
		{name: "a token kept for an hour after its expiry", add: func(s *knownSecrets) {
			s.add(now.Add(time.Minute), bearerValues("expiring-token-0123456789")...)
			s.now = func() time.Time { return now.Add(time.Hour) }
			s.add(time.Time{}, secret(0))
		}, kept: []string{"expiring-token-0123456789", secret(0)}},
		{name: "a token forgotten past that, though sent", add: func(s *knownSecrets) {
			s.add(now.Add(time.Minute), bearerValues("expiring-token-0123456789")...)
			s.add(time.Time{}, bearerValues("expiring-token-0123456789")...)
			s.now = func() time.Time { return now.Add(2 * time.Hour) }
			s.add(time.Time{}, secret(1))
		}, forgotten: []string{"expiring-token-0123456789"}, kept: []string{secret(1)}},
		{name: "past the bound the oldest forgotten", maxBytes: 3 * len(encodingsText(secret(0))), add: func(s *knownSecrets) {
			for i := range 5 {
				s.add(time.Time{}, secret(i))
			}
		}, forgotten: []string{secret(0), secret(1)}, kept: []string{secret(2), secret(3), secret(4)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newKnownSecrets()
			s.now = func() time.Time { return now }
			if tc.maxBytes > 0 {
				s.maxBytes = tc.maxBytes
			}
			tc.add(s)
			s.now = func() time.Time { return now.Add(tc.later) }
			for _, v := range tc.kept {
				resp := &abi.HTTPResponse{Body: []byte("stored: " + v)}
				s.redact(resp)
				if leak := credentialstest.Reflection(resp, []string{v}); leak != "" {
					t.Errorf("%q forgotten: %s", v, leak)
				}
			}
			for _, v := range tc.forgotten {
				resp := &abi.HTTPResponse{Body: []byte("stored: " + v)}
				s.redact(resp)
				if !bytes.Contains(resp.Body, []byte(v)) {
					t.Errorf("%q still looked for", v)
				}
			}
		})
	}
}

// encodingsText is the text of every form of v.
func encodingsText(v string) string {
	var b strings.Builder
	for _, n := range encodings(v) {
		b.Write(n.text)
	}
	return b.String()
}

// TestStoreMakesSecretsKnown: the secrets of the credentials' Secret keys
// are known as soon as the store is made, before any request, and each
// rotated value from the first read of it on, with those before it;
// identifiers (an access key ID) and the keys only readable raw are not
// searched for.
func TestStoreMakesSecretsKnown(t *testing.T) {
	saved := known
	known = newKnownSecrets()
	t.Cleanup(func() { known = saved })
	secrets := map[string]string{"token": "header-token-0123456789\n", "session": "FQoGZXIvYXdzEBYaDSessionToken0123456789",
		"id": "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "readable": "readable-value-0123456789"}
	dir := credentialstest.SecretDir(t, secrets)
	store, err := NewStore(Config{Dir: dir, Readable: []string{"readable"}, Auth: []AuthConfig{
		{Name: "header", Origins: []string{"https://api.example"}, Header: &HeaderAuth{Name: "X-Auth-Token", Key: "token"}},
		{Name: "sigv4", Origins: []string{"https://api.example"}, SigV4: &SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "session"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	stored := func() *abi.HTTPResponse {
		return &abi.HTTPResponse{Body: []byte(strings.Join([]string{"header-token-0123456789", "rotated-token-0123456789", secrets["session"],
			secrets["secret"], secrets["readable"], secrets["id"]}, "\n"))}
	}
	resp := stored()
	Redact(resp)
	if leak := credentialstest.Reflection(resp, []string{"header-token-0123456789", secrets["session"], secrets["secret"]}); leak != "" {
		t.Errorf("before any request: %s", leak)
	}
	for _, v := range []string{"rotated-token-0123456789", secrets["readable"], secrets["id"]} {
		if !bytes.Contains(resp.Body, []byte(v)) {
			t.Errorf("%q, no credential's secret, redacted", v)
		}
	}
	credentialstest.RotateSecret(t, dir, "token", "rotated-token-0123456789")
	if _, err := store.read("token"); err != nil {
		t.Fatal(err)
	}
	resp = stored()
	Redact(resp)
	if leak := credentialstest.Reflection(resp, []string{"header-token-0123456789", "rotated-token-0123456789"}); leak != "" {
		t.Errorf("after a rotation: %s", leak)
	}
}

// TestRedactLimits shows what the search does not find, as SECURITY.md
// states: pieces of a secret apart within one answer, hex in mixed case,
// white space inserted, and a value shorter than minReflectedLen alone.
// Each comes back as the origin sent it.
func TestRedactLimits(t *testing.T) {
	const secret = "limit-token-0123456789abcdef"
	s := newKnownSecrets()
	s.add(time.Time{}, secret, "alice:pw")
	hexed := hex.EncodeToString([]byte(secret))
	// Every other letter in upper case.
	mixed, upper := []byte(hexed), false
	for i, c := range mixed {
		if 'a' <= c && c <= 'f' {
			if upper {
				mixed[i] = c - 'a' + 'A'
			}
			upper = !upper
		}
	}
	for _, c := range []struct{ name, text string }{
		{"pieces apart", `{"first":"` + secret[:14] + `","rest":"` + secret[14:] + `"}`},
		{"mixed-case hex", string(mixed)},
		{"white space inserted", strings.Join(strings.Split(secret, ""), " ")},
		{"short value alone", "pw"},
	} {
		resp := &abi.HTTPResponse{Body: []byte(c.text)}
		s.redact(resp)
		if string(resp.Body) != c.text {
			t.Errorf("%s: %q redacted to %q; SECURITY.md says it is not", c.name, c.text, resp.Body)
		}
	}
}

// redactSets are the sets BenchmarkRedact searches for: a module's own
// (an OAuth2 credential whose token was refreshed once, and its client
// secret), and a process's of 16 modules, each with 4 static tokens, and
// 8 OAuth2 credentials, each with 3 tokens kept.
var redactSets = []struct {
	name   string
	values [][]string
}{
	{"module", [][]string{{"client-secret-value-42"}, bearerValues(benchToken(1, 0)), bearerValues(benchToken(2, 0))}},
	{"process", func() [][]string {
		var out [][]string
		for m := range 16 {
			for c := range 4 {
				out = append(out, bearerValues(fmt.Sprintf("static-token-%02d-%02d-0123456789abcdef0123456789", m, c)))
			}
		}
		for c := range 8 {
			for gen := range 3 {
				out = append(out, bearerValues(benchToken(byte(c), byte(gen))))
			}
		}
		return out
	}()},
}

// benchToken is an access token of the size a cloud's are.
func benchToken(seed, gen byte) string {
	return strings.Repeat(string(rune('A'+seed)), 3) + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{seed, gen, 42}, 400))
}

// BenchmarkRedact is the cost of looking for the secrets of each set in a
// response of each size.
func BenchmarkRedact(b *testing.B) {
	var page bytes.Buffer
	for page.Len() < 4<<20 {
		fmt.Fprintf(&page, `{"id":"i-%08x","zone":"eu-central-1a","state":"running","tags":{"Name":"node-%d"}},`, page.Len(), page.Len())
	}
	for _, set := range redactSets {
		s := newKnownSecrets()
		for _, values := range set.values {
			s.add(time.Time{}, values...)
		}
		for _, size := range []int{10 << 10, 4 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", set.name, size>>10), func(b *testing.B) {
				b.Logf("%d needles", len(s.set.Load().plain.needles))
				resp := &abi.HTTPResponse{StatusCode: 200, Body: page.Bytes()[:size],
					Headers: []abi.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Request-Id", Value: "5f1c8a7e-0000-4000-8000-000000000000"}}}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					s.redact(resp)
				}
			})
		}
	}
}
