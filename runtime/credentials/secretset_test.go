package credentials

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

// TestSecretSet: a set searches text as the host searches answers, in
// every form, and leaves alone what holds none of its values or only one
// too short to search for.
func TestSecretSet(t *testing.T) {
	const secret = "sim-token-0123456789"
	tests := []struct {
		name, text string
		values     []string
		holds      bool
	}{
		{"raw", "token " + secret + " sent", []string{secret}, true},
		{"hex", "id=" + hex.EncodeToString([]byte(secret)), []string{secret}, true},
		{"upper-case hex", strings.ToUpper(hex.EncodeToString([]byte(secret))), []string{secret}, true},
		{"percent-encoded", url.QueryEscape("x " + secret), []string{"x " + secret}, true},
		{"base64", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+secret)), []string{secret}, true},
		{"base64 url-safe unpadded", base64.RawURLEncoding.EncodeToString([]byte("ab" + secret)), []string{secret}, true},
		{"none", "checked node-1", []string{secret}, false},
		{"too short", "pw=hunter2", []string{"hunter2"}, false},
		{"short inside a longer value", "user:hunter2 sent", []string{"hunter2", "user:hunter2"}, true},
		{"no values", secret, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSecretSet(tt.values...)
			if got := s.Holds(tt.text); got != tt.holds {
				t.Fatalf("Holds(%q) = %v, want %v", tt.text, got, tt.holds)
			}
			redacted := s.Redact(tt.text)
			if changed := redacted != tt.text; changed != tt.holds {
				t.Fatalf("Redact(%q) = %q", tt.text, redacted)
			}
			if tt.holds && (s.Holds(redacted) || len(redacted) != len(tt.text) || !strings.Contains(redacted, "********")) {
				t.Fatalf("Redact(%q) = %q: not overwritten in place", tt.text, redacted)
			}
		})
	}
}
