package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/examples/simcloud"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseFlags(t *testing.T) {
	tokenFile := writeFile(t, "token", "  s3cret\n")
	emptyFile := writeFile(t, "empty", "\n")
	seed := writeFile(t, "seed.json", `[{"name":"node-a","zone":"sim-1b"},{"id":"i-9","name":"node-b","state":"stopped"}]`)
	badSeed := writeFile(t, "bad.json", `[{"name":"node-a","nodeName":"x"}]`)

	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, o simcloud.Options, listen string)
		err   string
	}{
		{name: "token required", args: nil, err: "--token"},
		{name: "token and file", args: []string{"--token", "a", "--token-file", tokenFile}, err: "mutually exclusive"},
		{name: "empty token file", args: []string{"--token-file", emptyFile}, err: "empty"},
		{name: "missing token file", args: []string{"--token-file", "/nonexistent"}, err: "token-file"},
		{name: "bad pool", args: []string{"--token", "a", "--ip-pool", "x"}, err: "--ip-pool"},
		{name: "bad pool start", args: []string{"--token", "a", "--ip-pool-start", "x"}, err: "--ip-pool-start"},
		{name: "bad seed file", args: []string{"--token", "a", "--seed-instances", badSeed}, err: "unknown field"},
		{name: "stray argument", args: []string{"--token", "a", "extra"}, err: "unexpected"},
		{name: "defaults", args: []string{"--token", "a"}, check: func(t *testing.T, o simcloud.Options, listen string) {
			if listen != "127.0.0.1:8780" || o.Token != "a" || o.AdminToken != "" || o.IPPool != simcloud.DefaultIPPool || o.Seed != 1 {
				t.Fatalf("%+v %s", o, listen)
			}
		}},
		{name: "everything", args: []string{"--token-file", tokenFile, "--admin-token", "adm", "--listen", ":0",
			"--seed-instances", seed, "--ip-pool", "198.51.100.0/24", "--ip-pool-start", "198.51.100.100",
			"--seed", "7", "--latency", "5ms", "--rate-limit", "20", "--burst", "40"},
			check: func(t *testing.T, o simcloud.Options, listen string) {
				if listen != ":0" || o.Token != "s3cret" || o.AdminToken != "adm" || o.IPPoolStart.String() != "198.51.100.100" ||
					o.Seed != 7 || o.Global != (simcloud.Global{Latency: 5 * time.Millisecond, RateLimit: 20, Burst: 40}) {
					t.Fatalf("%+v", o)
				}
				if len(o.Instances) != 2 || o.Instances[1].ID != "i-9" || o.Instances[1].State != "stopped" {
					t.Fatalf("instances %+v", o.Instances)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, listen, err := parseFlags(tt.args, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o, listen)
		})
	}
}

// TestRun starts the server, makes a request with a seeded instance and
// checks that cancelling the context shuts it down, even with a request
// held by injected latency.
func TestRun(t *testing.T) {
	seed := writeFile(t, "seed.json", `[{"name":"node-a"}]`)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--token", "tok", "--seed-instances", seed, "--latency", "0s"},
			io.Discard, logger, func(a net.Addr) { addrc <- a })
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatal(err)
	}

	req, _ := http.NewRequest("GET", base+"/v1/instances?name=node-a", nil)
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got []simcloud.Instance
	err = json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(got) != 1 || got[0].ID != "i-0001" {
		t.Fatalf("%d %+v %v", res.StatusCode, got, err)
	}

	// Hold a request in a long injected delay, then shut down.
	fault := strings.NewReader(`{"endpoint":"GET /v1/zones","latency":"1m"}`)
	res, err = http.Post(base+"/admin/faults", "application/json", fault)
	if err != nil || res.StatusCode != 200 {
		t.Fatal(res.StatusCode, err)
	}
	res.Body.Close()
	held := make(chan struct{})
	go func() {
		defer close(held)
		req, _ := http.NewRequest("GET", base+"/v1/zones", nil)
		req.Header.Set("Authorization", "Bearer tok")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no shutdown")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	<-held
	out := logs.String()
	for _, want := range []string{"simcloud listening", "path=\"/v1/instances?name=node-a\" status=200", "shutting down"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// lockedBuffer is a log sink safe to read while the server still writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
