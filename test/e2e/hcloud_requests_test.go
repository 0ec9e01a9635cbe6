package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/scale/requests"
)

// TestHcloudRequests is TestHcloudDifferential's sibling for reads: the
// Hetzner Cloud API requests per hour, by endpoint, that wasmccm with the
// TinyGo-built hcloud module and the official CCM named by
// WASMCCM_HCLOUD_CCM make in steady state with 60 Ready Nodes and their
// routes, each on a fresh kube-apiserver and fake API, with the CCMs'
// default periods (test/scale/requests says how). test/scale's
// TestRequests runs the same at other sizes. Skipped unless the variable
// is set; WASMCCM_REQUESTS_WINDOW changes the window (6 minutes, so that
// it holds a node status update).
func TestHcloudRequests(t *testing.T) {
	official := os.Getenv("WASMCCM_HCLOUD_CCM")
	if official == "" {
		t.Skip("WASMCCM_HCLOUD_CCM (the official CCM binary) is not set")
	}
	window := 6 * time.Minute
	if v := os.Getenv("WASMCCM_REQUESTS_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WASMCCM_REQUESTS_WINDOW: %v", err)
		}
		window = d
	}
	module, err := wasmbuild.Build(hcloudModule, wasmbuild.TinyGo)
	if err != nil {
		t.Fatal(err)
	}
	var results []*requests.Result
	for _, o := range []requests.Options{
		{Impl: requests.Wasmccm, Binary: ccmBinary, Module: module, CompilationCacheDir: filepath.Join(wasmbuild.CacheDir(), "compilation")},
		{Impl: requests.Official, Binary: official},
	} {
		o.Nodes, o.Window, o.Timeout = 60, window, 10*time.Minute
		t.Run(string(o.Impl), func(t *testing.T) { results = append(results, requests.Run(t, o)) })
	}
	var b strings.Builder
	requests.Report(&b, results)
	t.Log("\n" + b.String())
}
