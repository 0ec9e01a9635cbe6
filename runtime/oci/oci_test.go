package oci_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmccm/wasmccm/runtime/oci"
	"github.com/wasmccm/wasmccm/runtime/oci/imageref"
)

// wasmModule is a valid module: the magic, the version and a custom
// section, so that two modules can differ.
func wasmModule(tag string) []byte {
	name := "wasmccm-test"
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, tag...)
	return append([]byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00, 0x00, byte(len(payload))}, payload...)
}

const user, password = "ci", "s3cret"

// testRegistry is go-containerregistry's registry served over loopback
// HTTP, optionally behind basic authentication, with a hook that can
// tamper with responses.
type testRegistry struct {
	*httptest.Server
	host   string // host:port, as in references
	tamper atomic.Pointer[func(path string, body []byte) []byte]
}

func startRegistry(t *testing.T, auth bool) *testRegistry {
	t.Helper()
	return serveRegistry(t, auth, nil)
}

// serveRegistry serves on ln when given (to restart on a known address).
func serveRegistry(t *testing.T, auth bool, ln net.Listener) *testRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r := &testRegistry{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if auth {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		tamper := r.tamper.Load()
		if tamper == nil || req.Method != http.MethodGet {
			reg.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, req)
		body := (*tamper)(req.URL.Path, rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
	if ln == nil {
		r.Server = httptest.NewServer(handler)
	} else {
		r.Server = httptest.NewUnstartedServer(handler)
		r.Listener = ln
		r.Start()
	}
	t.Cleanup(r.Close)
	r.host = strings.TrimPrefix(r.URL, "http://")
	return r
}

// dockerConfig writes a docker config file with the test credentials for
// host and returns its path.
func dockerConfig(t *testing.T, host string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"auths": map[string]any{
		host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPushPull pushes a module and pulls it back, with and without basic
// authentication, and checks what a pull refuses.
func TestPushPull(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "anonymous"
		if auth {
			name = "basic auth"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			reg := startRegistry(t, auth)
			var opts oci.Options
			if auth {
				opts.Keychain = oci.DockerConfigKeychain(dockerConfig(t, reg.host))
				if _, err := oci.Push(ctx, wasmModule("v1"), reg.host+"/simcloud:v1", oci.Options{}); err == nil ||
					!strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
					t.Fatalf("push without credentials: error %v, want unauthorized", err)
				}
			}
			module := wasmModule("v1")
			ref, err := oci.Push(ctx, gz(t, module), reg.host+"/simcloud:v1", opts)
			if err != nil {
				t.Fatal(err)
			}
			// The same module, compressed or not, is the same artifact.
			again, err := oci.Push(ctx, module, reg.host+"/simcloud:v1-again", opts)
			if err != nil {
				t.Fatal(err)
			}
			if again != ref {
				t.Errorf("the same module pushed twice: %s, then %s", ref, again)
			}
			other, err := oci.Push(ctx, wasmModule("v2"), reg.host+"/simcloud:v2", opts)
			if err != nil {
				t.Fatal(err)
			}

			tests := []struct {
				name      string
				ref       string
				allowTags bool
				tamper    func(path string, body []byte) []byte
				want      []byte
				wantErr   string
			}{
				{name: "by digest", ref: ref.String(), want: module},
				{name: "tag refused", ref: reg.host + "/simcloud:v1", wantErr: "has no digest"},
				{name: "tag allowed", ref: reg.host + "/simcloud:v2", allowTags: true, want: wasmModule("v2")},
				{name: "unknown digest", ref: reg.host + "/simcloud@sha256:" + strings.Repeat("0", 64), wantErr: "MANIFEST_UNKNOWN"},
				{name: "manifest not matching the digest", ref: ref.String(),
					tamper: func(path string, body []byte) []byte {
						if strings.Contains(path, "/manifests/") {
							return append(body, ' ')
						}
						return body
					}, wantErr: "does not match"},
				{name: "module not matching the manifest", ref: ref.String(),
					tamper: func(path string, body []byte) []byte {
						if strings.Contains(path, "/blobs/") && bytes.HasPrefix(body, []byte("\x00asm")) {
							return wasmModule("v9")
						}
						return body
					}, wantErr: "sha256"},
				{name: "another artifact's digest in this repository", ref: other.String(), want: wasmModule("v2")},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if tt.tamper != nil {
						reg.tamper.Store(&tt.tamper)
						defer reg.tamper.Store(nil)
					}
					o := opts
					o.AllowTags = tt.allowTags
					m, err := oci.Pull(ctx, tt.ref, o)
					if tt.wantErr != "" {
						if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
							t.Fatalf("pull error = %v, want one containing %q", err, tt.wantErr)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(m.Wasm, tt.want) {
						t.Errorf("pulled %x, want %x", m.Wasm, tt.want)
					}
					if !strings.HasSuffix(tt.ref, m.Digest) && !tt.allowTags {
						t.Errorf("digest %s is not the reference's %s", m.Digest, tt.ref)
					}
				})
			}
		})
	}
}

// TestPushRefusesNonModules checks that only wasm modules are pushed.
func TestPushRefusesNonModules(t *testing.T) {
	reg := startRegistry(t, false)
	_, err := oci.Push(context.Background(), []byte("#!/bin/sh\n"), reg.host+"/simcloud:v1", oci.Options{})
	if err == nil || !strings.Contains(err.Error(), "not a wasm module") {
		t.Fatalf("error = %v, want not a wasm module", err)
	}
}

// TestCacheServesWhileRegistryDown pulls through the cache, stops the
// registry and fetches again: the module named by digest keeps coming from
// the cache; a tag, which needs the registry, fails clearly.
func TestCacheServesWhileRegistryDown(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, false)
	ref, err := oci.Push(ctx, wasmModule("v1"), reg.host+"/simcloud:v1", oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache := &oci.Cache{Dir: t.TempDir(), Options: oci.Options{AllowTags: true}}
	first, err := cache.Fetch(ctx, ref.String())
	if err != nil {
		t.Fatal(err)
	}
	reg.Close()

	second, err := cache.Fetch(ctx, ref.String())
	if err != nil {
		t.Fatalf("registry down, module cached: %v", err)
	}
	if !bytes.Equal(first.Wasm, second.Wasm) || first.Digest != second.Digest {
		t.Errorf("cached %s differs from pulled %s", second.Digest, first.Digest)
	}
	onDisk, err := os.ReadFile(cache.Path(ref.DigestStr()))
	if err != nil || !bytes.Equal(onDisk, first.Wasm) {
		t.Errorf("cache file %s: %v", cache.Path(ref.DigestStr()), err)
	}
	if _, err := cache.Fetch(ctx, reg.host+"/simcloud:v1"); err == nil || !strings.Contains(err.Error(), reg.host) {
		t.Errorf("tag with the registry down: error %v, want one naming the registry", err)
	}

	// A damaged cache entry is not served; with the registry down that is
	// an error, not a wrong module.
	if err := os.Chmod(cache.Path(ref.DigestStr()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache.Path(ref.DigestStr()), wasmModule("evil"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := cache.Fetch(ctx, ref.String()); err == nil {
		t.Errorf("damaged cache entry served: %x", m.Wasm)
	}
}

// TestCacheResolvesTags fetches a tag through the cache: it is resolved
// at the registry each time, and a module already cached is not
// downloaded again.
func TestCacheResolvesTags(t *testing.T) {
	ctx := context.Background()
	reg := startRegistry(t, false)
	var layerGets atomic.Int32
	count := func(path string, body []byte) []byte {
		if strings.Contains(path, "/blobs/") && bytes.HasPrefix(body, []byte("\x00asm")) {
			layerGets.Add(1)
		}
		return body
	}
	reg.tamper.Store(&count)
	cache := &oci.Cache{Dir: t.TempDir(), Options: oci.Options{AllowTags: true}}
	tag := reg.host + "/simcloud:stable"
	for i, tt := range []struct {
		push      []byte // pushed to the tag first, if any
		want      []byte
		layerGets int32
	}{
		{push: wasmModule("v1"), want: wasmModule("v1"), layerGets: 1},
		{want: wasmModule("v1"), layerGets: 1},
		{push: wasmModule("v2"), want: wasmModule("v2"), layerGets: 2},
	} {
		if tt.push != nil {
			if _, err := oci.Push(ctx, tt.push, tag, oci.Options{}); err != nil {
				t.Fatal(err)
			}
		}
		m, err := cache.Fetch(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Wasm, tt.want) || layerGets.Load() != tt.layerGets {
			t.Errorf("fetch %d: module %x after %d layer downloads, want %x after %d", i, m.Wasm, layerGets.Load(), tt.want, tt.layerGets)
		}
	}
}

// TestFetchRetrying starts with the registry down: every failed attempt is
// reported with a clear error, and the fetch succeeds once the registry is
// up on its address.
func TestFetchRetrying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Push to a registry, then take it down and keep its address.
	reg := startRegistry(t, true)
	keychain := oci.DockerConfigKeychain(dockerConfig(t, reg.host))
	ref, err := oci.Push(ctx, wasmModule("v1"), reg.host+"/simcloud:v1", oci.Options{Keychain: keychain})
	if err != nil {
		t.Fatal(err)
	}
	reg.Close()

	cache := &oci.Cache{Dir: t.TempDir(), Options: oci.Options{Keychain: keychain}}
	failures := make(chan error, 100)
	done := make(chan error, 1)
	go func() {
		_, err := cache.FetchRetrying(ctx, ref.String(), 10*time.Millisecond, 50*time.Millisecond, func(err error, _ time.Duration) {
			failures <- err
		})
		done <- err
	}()
	for range 2 {
		select {
		case err := <-failures:
			if !strings.Contains(err.Error(), reg.host) || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("failure report %q names neither the registry nor the cause", err)
			}
		case err := <-done:
			t.Fatalf("fetch ended with the registry down: %v", err)
		case <-ctx.Done():
			t.Fatal("no failure reported")
		}
	}

	// The registry's storage is in memory, so the restarted one is empty:
	// push again on the same address.
	ln, err := net.Listen("tcp", reg.host)
	if err != nil {
		t.Fatal(err)
	}
	reg = serveRegistry(t, true, ln)
	if _, err := oci.Push(ctx, wasmModule("v1"), reg.host+"/simcloud:v1", oci.Options{Keychain: keychain}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fetch after the registry came up: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("fetch did not succeed after the registry came up")
	}

	// Refusals are final: no retry.
	if _, err := cache.FetchRetrying(ctx, reg.host+"/simcloud:v1", time.Hour, time.Hour, nil); !errors.Is(err, imageref.ErrTagRefused) {
		t.Errorf("tag: error %v, want ErrTagRefused at once", err)
	}
}

// TestDockerConfigKeychain checks the credential forms of a docker config
// file and the lookup by registry host.
func TestDockerConfigKeychain(t *testing.T) {
	reg := startRegistry(t, true)
	ctx := context.Background()
	encoded := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	tests := []struct {
		name    string
		config  string
		wantErr string
	}{
		{name: "auth", config: `{"auths":{"` + reg.host + `":{"auth":"` + encoded + `"}}}`},
		{name: "username and password", config: `{"auths":{"` + reg.host + `":{"username":"` + user + `","password":"` + password + `"}}}`},
		{name: "URL key", config: `{"auths":{"http://` + reg.host + `/v2/":{"auth":"` + encoded + `"}}}`},
		{name: "other registry only", config: `{"auths":{"registry.example":{"auth":"` + encoded + `"}}}`, wantErr: "401"},
		{name: "wrong password", config: `{"auths":{"` + reg.host + `":{"username":"ci","password":"no"}}}`, wantErr: "401"},
		{name: "malformed auth", config: `{"auths":{"` + reg.host + `":{"auth":"!!"}}}`, wantErr: "illegal base64"},
		{name: "not JSON", config: `auths:`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := oci.Push(ctx, wasmModule(tt.name), reg.host+"/simcloud:v1", oci.Options{Keychain: oci.DockerConfigKeychain(path)})
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
