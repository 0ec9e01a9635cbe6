package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

// TestRedactFindsEveryOffset: a secret inside a longer text, at any
// offset, is found in that text raw or encoded whole, and nothing made of
// its bits alone is left.
func TestRedactFindsEveryOffset(t *testing.T) {
	const secret = "bearer-token-0123456789abcdef"
	s := newSentSecrets("offsets")
	s.record(secretSlot{"c", "request"}, secret)
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

// BenchmarkRedact is the cost of looking for a module's secrets in a
// response of each size: an OAuth2 credential whose token was refreshed
// once (the current and the previous token), and a client secret.
func BenchmarkRedact(b *testing.B) {
	s := newSentSecrets("bench")
	token := func(seed byte) string {
		return strings.Repeat(string(rune('A'+seed)), 3) + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{seed, 7, 42}, 400))
	}
	s.record(secretSlot{"c", "client secret"}, "client-secret-value-42")
	s.record(secretSlot{"c", "request"}, token(1), "Bearer "+token(1))
	s.record(secretSlot{"c", "request"}, token(2), "Bearer "+token(2))
	b.Logf("%d needles", len(s.set.Load().plain.needles))
	var page bytes.Buffer
	for page.Len() < 4<<20 {
		fmt.Fprintf(&page, `{"id":"i-%08x","zone":"eu-central-1a","state":"running","tags":{"Name":"node-%d"}},`, page.Len(), page.Len())
	}
	for _, size := range []int{10 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
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
