package cloudconfig

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name, yaml, wantErr string
	}{
		{"full", `
clusterName: prod
module: {path: /m/provider.wasm.gz, sha256: "abc", compilationCacheDir: /var/cache, reloadInterval: 5s}
limits: {poolSize: 4, callTimeout: 10s, memoryLimitMiB: 64}
http: {allowedOrigins: ["https://api.example.com", "http://127.0.0.1:8780"], timeout: 5s}
credentials:
  dir: /etc/creds
  auth: [{name: token, origins: ["https://api.example.com"], bearer: {key: token}}]
providerConfig: {endpoint: "https://api.example.com", region: eu-1}
`, ""},
		{"unknown field", "module: {path: x}\nlimit: {poolSize: 2}\n", `unknown field "limit"`},
		{"no module", "clusterName: x\n", "module.path or module.image is required"},
		{"path and image", "module: {path: x, image: r.example/m@sha256:" + strings.Repeat("a", 64) + ", imageCacheDir: /c}\n", "exclude each other"},
		{"image by tag", "module: {image: r.example/m:v1, imageCacheDir: /c}\n", "has no digest"},
		{"image without cache", "module: {image: r.example/m@sha256:" + strings.Repeat("a", 64) + "}\n", "needs module.imageCacheDir"},
		{"registry settings without image", "module: {path: x, allowTags: true}\n", "need module.image"},
		{"bad origin", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a/path\"]}\n", "only scheme://host[:port]"},
		{"bad credential", "module: {path: x}\ncredentials: {dir: /d, readable: [\"../etc/passwd\"]}\n", "not a plain Secret key"},
		{"readable without dir", "module: {path: x}\ncredentials: {readable: [token]}\n", "need credentials.dir"},
		{"granted is gone", "module: {path: x}\ncredentials: {dir: /d, granted: [token]}\n", "replaced by credentials.auth"},
		{"auth origin not allowed", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://b.example\"], bearer: {key: t}}]}\n",
			"origin https://b.example:443 is not in http.allowedOrigins"},
		{"auth without origins", "module: {path: x}\ncredentials: {dir: /d, auth: [{name: t, bearer: {key: t}}]}\n", "no origins"},
		{"auth with two schemes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: t}, basic: {usernameKey: u, passwordKey: p}}]}\n",
			"set exactly one of"},
		{"auth key escapes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: ../t}}]}\n",
			"not a plain Secret key"},
		{"auth twice", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: t}}, {name: t, origins: [\"https://a.example\"], bearer: {key: u}}]}\n",
			"listed twice"},
		{"oauth2 without token URL", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], oauth2ClientCredentials: {clientIDKey: i, clientSecretKey: s}}]}\n",
			"is not an http(s) URL"},
		{"google without scopes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], googleServiceAccount: {key: k}}]}\n",
			"scopes are required"},
		{"unknown auth field", "module: {path: x}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {token: t}}]}\n", `unknown field "token"`},
		{"negative", "module: {path: x}\nlimits: {callTimeout: -1s}\n", "must not be negative"},
		{"half signature", "module: {path: x, publicKeyPath: k}\n", "go together"},
		{"duration not a string", "module: {path: x, reloadInterval: 5}\n", "cannot unmarshal number"},
		{"duration unparsable", "module: {path: x, reloadInterval: soon}\n", "invalid duration"},
		{"rate limit off the list", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"], rateLimits: [{origin: \"https://b.example\", perHour: 1}]}\n", "not in http.allowedOrigins"},
		{"rollout concurrency", "module: {path: x, rollout: {shadow: {concurrency: 65}}}\n", "concurrency must be in 0..64"},
		{"sweep period", "module: {path: x}\norphanSweep: {period: 10ms}\n", "shorter than 1s"},
		{"pool too large", "module: {path: x}\nlimits: {poolSize: 257}\n", "outside 0..256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseOne(strings.NewReader(tc.yaml))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := string(cfg.ProviderConfig); got != `{"endpoint":"https://api.example.com","region":"eu-1"}` {
					t.Fatalf("providerConfig = %s", got)
				}
				if cfg.Limits.MemoryLimitMiB != 64 || cfg.Limits.CallTimeout.Duration != 10*time.Second || cfg.Module.ReloadInterval.Duration != 5*time.Second {
					t.Fatalf("config = %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// parseOne parses a one-module cloud-config and returns its module's.
func parseOne(r io.Reader) (*Config, error) {
	f, err := Parse(r)
	if err != nil {
		return nil, err
	}
	return f.Pick("")
}

// TestParseSafetyAndRollout: the safety and rollout sections, set and
// disabled, and their bounds.
func TestParseSafetyAndRollout(t *testing.T) {
	cases := []struct{ name, yaml, wantErr string }{
		{"full", `module:
  path: x
  rollout:
    shadow: {duration: 1m, calls: 10, concurrency: 2}
    rollback: {window: 10m, minCalls: 5, failurePercent: 50}
safety: {maxNodeDeletions: {count: 3, percent: 5, window: 15m, corroborated: {percent: 20}}}
`, ""},
		{"disabled", "module: {path: x, rollout: {shadow: {disabled: true}, rollback: {disabled: true}}}\nsafety: {maxNodeDeletions: {disabled: true}}\n", ""},
		{"percent over 100", "module: {path: x}\nsafety: {maxNodeDeletions: {percent: 101}}\n", "outside 0..100"},
		{"corroborated percent over 100", "module: {path: x}\nsafety: {maxNodeDeletions: {corroborated: {percent: 150}}}\n", "corroborated.percent 150 is outside"},
		{"negative count", "module: {path: x}\nsafety: {maxNodeDeletions: {count: -1}}\n", "is negative"},
		{"typo", "module: {path: x}\nsafety: {maxNodeDeletion: {count: 1}}\n", `unknown field "maxNodeDeletion"`},
		{"bad failure percent", "module: {path: x, rollout: {rollback: {failurePercent: 200}}}\n", "failurePercent"},
		{"negative shadow", "module: {path: x, rollout: {shadow: {duration: -1s}}}\n", "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.yaml))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDurationJSON: a duration reads and writes as Go writes it.
func TestDurationJSON(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || d.Duration != 90*time.Second {
		t.Fatalf("read %v, %v", d, err)
	}
	if out, err := json.Marshal(Duration{2 * time.Minute}); err != nil || string(out) != `"2m0s"` {
		t.Fatalf("wrote %s, %v", out, err)
	}
}

// TestWithDefaults: unset values take their defaults, set ones stay, and
// a disabled corroboration gets no percentage.
func TestWithDefaults(t *testing.T) {
	b := DeletionBudget{Count: intPointer(0), Corroborated: Corroboration{Disabled: true}}.WithDefaults()
	if *b.Count != 0 || *b.Percent != 1 || b.Window.Duration != 10*time.Minute || b.Corroborated.Percent != nil {
		t.Fatalf("deletion budget %+v", b)
	}
	if p := (DeletionBudget{}).WithDefaults().Corroborated.Percent; p == nil || *p != 50 {
		t.Fatalf("corroborated percent %v, want 50", p)
	}
	if s := (OrphanSweep{MaxDeletionsPerHour: 2}).WithDefaults(); s.Period.Duration != 10*time.Minute || s.MaxDeletionsPerHour != 2 {
		t.Fatalf("orphan sweep %+v", s)
	}
}
