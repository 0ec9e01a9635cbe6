package provider

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
	"github.com/wasmccm/wasmccm/runtime/oci"
)

// withCustomSection returns wasm with a custom section appended: the same
// module to the runtime, another artifact to a registry.
func withCustomSection(wasm []byte, tag string) []byte {
	const name = "wasmccm.test"
	payload := append(append([]byte{byte(len(name))}, name...), tag...)
	return append(append(bytes.Clone(wasm), 0x00, byte(len(payload))), payload...)
}

// TestModuleImage runs module.image against a registry with basic
// authentication: the pull at start, a changed reference picked up, and
// the registry going away, at start and later.
func TestModuleImage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ccm" || p != "pull" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	registryConfig := filepath.Join(dir, "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("ccm:pull"))
	lifecycletest.WriteFile(t, registryConfig, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`))
	keychain := oci.Options{Keychain: oci.DockerConfigKeychain(registryConfig)}

	v1 := lifecycletest.Guest(t, "testprovider")
	v2, v3, v4, v5 := withCustomSection(v1, "v2"), withCustomSection(v1, "v3"), withCustomSection(v1, "v4"), withCustomSection(v1, "v5")
	refs := map[string]string{}
	for name, wasm := range map[string][]byte{"v1": v1, "v2": v2, "v3": v3, "v4": v4} {
		ref, err := oci.Push(ctx, wasm, host+"/testprovider:"+name, keychain)
		if err != nil {
			t.Fatal(err)
		}
		refs[name] = ref.String()
	}

	cacheDir := filepath.Join(dir, "cache")
	cloudConfig := filepath.Join(dir, "cloud-config.yaml")
	writeConfig := func(ref string, allowTags bool) {
		lifecycletest.WriteFile(t, cloudConfig, fmt.Appendf(nil, "module: {image: %q, allowTags: %v, registryConfig: %q, imageCacheDir: %q, reloadInterval: 20ms}\n",
			ref, allowTags, registryConfig, cacheDir))
	}
	load := func() *cloudconfig.Config {
		data, err := os.ReadFile(cloudConfig)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := parseConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Module.CompilationCacheDir = lifecycletest.CompilationCache()
		return cfg
	}
	served := filepath.Join(cacheDir, modulefile.ServedFile)
	// servedEventually waits until the served file holds want.
	servedEventually := func(want []byte) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _ := os.ReadFile(served)
			if bytes.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("served module is %d bytes, not the %d expected", len(got), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	writeConfig(refs["v1"], false)
	cfg := load()
	if err := useImage(ctx, cfg, func() (*cloudconfig.Config, error) { return readConfig(cloudConfig) }); err != nil {
		t.Fatal(err)
	}
	if cfg.Module.Path != served {
		t.Fatalf("module.path = %q, want the served file %q", cfg.Module.Path, served)
	}
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if got, err := ReadModule(cfg.Module); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("served module: %v, want v1", err)
	}

	t.Run("changed reference", func(t *testing.T) {
		writeConfig(refs["v2"], false)
		servedEventually(v2)
	})

	t.Run("moved tag, tags allowed", func(t *testing.T) {
		writeConfig(host+"/testprovider:v4", true)
		servedEventually(v4)
		if _, err := oci.Push(ctx, v5, host+"/testprovider:v4", keychain); err != nil {
			t.Fatal(err)
		}
		servedEventually(v5)
	})

	t.Run("unusable cloud-config keeps the module", func(t *testing.T) {
		lifecycletest.WriteFile(t, cloudConfig, []byte("module: {image: "+host+"/testprovider:v3, imageCacheDir: /c}\n"))
		time.Sleep(100 * time.Millisecond)
		servedEventually(v5)
	})

	srv.Close()
	t.Run("registry down later: the module keeps serving", func(t *testing.T) {
		writeConfig(refs["v3"], false)
		time.Sleep(100 * time.Millisecond) // several polls, each failing
		servedEventually(v5)
		if got, err := ReadModule(cfg.Module); err != nil || !bytes.Equal(got, v5) {
			t.Fatalf("served module: %v, want v5", err)
		}
	})

	t.Run("registry down at a restart: served from the cache", func(t *testing.T) {
		writeConfig(refs["v1"], false)
		restarted := load()
		if err := useImage(ctx, restarted, nil); err != nil {
			t.Fatal(err)
		}
		servedEventually(v1)
	})

	t.Run("registry down at start, nothing cached: a clear error after retries", func(t *testing.T) {
		defer func(d time.Duration) { startPullTimeout = d }(startPullTimeout)
		startPullTimeout = 1500 * time.Millisecond
		fresh := load()
		fresh.Module.ImageCacheDir = t.TempDir()
		// A module installed by an earlier run is not what module.image names.
		stale := filepath.Join(fresh.Module.ImageCacheDir, modulefile.ServedFile)
		lifecycletest.WriteFile(t, stale, v1)
		start := time.Now()
		err := useImage(ctx, fresh, nil)
		if err == nil || !strings.Contains(err.Error(), "module.image "+refs["v1"]) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("error = %v, want one naming the image and the cause", err)
		}
		if elapsed := time.Since(start); elapsed < startPullTimeout {
			t.Errorf("gave up after %v, before retrying for %v", elapsed, startPullTimeout)
		}
		if _, err := os.Stat(fresh.Module.Path); fresh.Module.Path != stale || !os.IsNotExist(err) {
			t.Errorf("module.path %q after a failed pull (stat: %v); want the served file, removed", fresh.Module.Path, err)
		}
	})
}
