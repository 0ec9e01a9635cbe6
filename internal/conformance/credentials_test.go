package conformance

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
)

// TestLeaks: a credential the module logs, answers or sends in a URL fails
// no-credential-leak raw or in any encoding the host searches answers
// for, and the failure shows it redacted in every form.
func TestLeaks(t *testing.T) {
	const token = "sim-token-0123456789"
	hexToken, b64Token := hex.EncodeToString([]byte(token)), base64.StdEncoding.EncodeToString([]byte(token))
	tests := []struct {
		name             string
		values           []string
		log, answer, url string
		// fails is the check that fails, "" when none does; skipped
		// says the rule is skipped.
		fails   string
		skipped bool
	}{
		{name: "clean", values: []string{token}, log: "checked node-1", answer: `{"ProviderID":"simcloud://i-1"}`, url: "/v1/instances"},
		{name: "raw in a log line", values: []string{token}, log: "token " + token, fails: "no credential in the module's log"},
		{name: "hex in a log line", values: []string{token}, log: "token " + hexToken, fails: "no credential in the module's log"},
		{name: "upper-case hex in an error", values: []string{token}, answer: "bad token " + strings.ToUpper(hexToken), fails: "no credential in errors or results"},
		{name: "base64 in a Node address", values: []string{token}, answer: `{"NodeAddresses":[{"Type":"Hostname","Address":"` + b64Token + `"}]}`, fails: "no credential in errors or results"},
		{name: "base64 after other bytes", values: []string{token}, answer: base64.RawURLEncoding.EncodeToString([]byte("user:" + token)), fails: "no credential in errors or results"},
		{name: "percent-encoded in a URL", values: []string{token + "/x"}, url: "/v1/instances?t=" + url.QueryEscape(token+"/x"), fails: "no credential in request URLs"},
		{name: "hex in a URL", values: []string{token}, url: "/v1/instances/" + hexToken, fails: "no credential in request URLs"},
		{name: "no secret", log: "token " + token, skipped: true},
		{name: "too short to search for", values: []string{"pw1"}, log: "token pw1", skipped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := NewInterceptor(tt.values)
			r := &runner{ic: ic, secrets: ic.secrets, report: &Report{secrets: ic.secrets}}
			rt := ic.Wrap(cloudFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), ContentLength: 2}, nil
			}))
			if tt.url != "" {
				req, _ := http.NewRequest("GET", "http://cloud.example"+tt.url, nil)
				if _, err := rt.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			}
			if tt.log != "" {
				r.logLine(abi.LogInfo, tt.log)
			}
			if tt.answer != "" {
				r.texts = append(r.texts, text{"the result of InstanceMetadata", tt.answer})
			}
			r.leaks(tt.values)
			var failed []string
			for _, res := range r.report.Results {
				if res.Rule != RuleNoCredentialLeak {
					t.Fatalf("result of rule %s", res.Rule)
				}
				if (res.Skipped != "") != tt.skipped {
					t.Errorf("%s: skipped %q", res.Name, res.Skipped)
				}
				if res.Failure != "" {
					failed = append(failed, res.Name)
					if !strings.Contains(res.Failure, "********") {
						t.Errorf("%s: the failure does not show the secret redacted: %s", res.Name, res.Failure)
					}
				}
			}
			var b strings.Builder
			if err := r.report.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, form := range []string{token, hexToken, strings.ToUpper(hexToken), b64Token} {
				if strings.Contains(b.String(), form) {
					t.Errorf("the report shows %q:\n%s", form, b.String())
				}
			}
			if strings.Join(failed, ",") != tt.fails {
				t.Errorf("failed checks %q, want %q", failed, tt.fails)
			}
		})
	}
}
