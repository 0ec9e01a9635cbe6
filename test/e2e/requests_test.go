package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/scale/requests"
)

// compareRequests runs the request count of test/scale/requests for
// wasmccm with the module at pkgDir (TinyGo-built, as deployed) and for
// the official CCM named by the variable official, at each number of
// Nodes, and logs the tables. It is skipped when the variable is not set.
func compareRequests(t *testing.T, cloud requests.Cloud, pkgDir, official string, nodes []int) {
	binary := os.Getenv(official)
	if binary == "" {
		t.Skip(official + " (the official CCM binary) is not set")
	}
	window := 6 * time.Minute
	if v := os.Getenv("WASMCCM_REQUESTS_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WASMCCM_REQUESTS_WINDOW: %v", err)
		}
		window = d
	}
	module, err := wasmbuild.Build(pkgDir, wasmbuild.TinyGo)
	if err != nil {
		t.Fatal(err)
	}
	var results []*requests.Result
	for _, n := range nodes {
		for _, o := range []requests.Options{
			{Impl: requests.Wasmccm, Binary: ccmBinary, Module: module, CompilationCacheDir: filepath.Join(wasmbuild.CacheDir(), "compilation")},
			{Impl: requests.Official, Binary: binary},
		} {
			o.Cloud, o.Nodes, o.Window, o.Timeout = cloud, n, window, 10*time.Minute+time.Duration(n)*time.Second
			t.Run(string(o.Impl)+"-"+strconv.Itoa(n), func(t *testing.T) { results = append(results, requests.Run(t, o)) })
		}
	}
	var b strings.Builder
	requests.Report(&b, results)
	t.Log("\n" + b.String())
}
