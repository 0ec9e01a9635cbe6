//go:build linux

package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/scale/requests"
)

// TestRequests is the request-count benchmark (package requests): the
// cloud API requests per hour, by endpoint, of wasmccm with the
// TinyGo-built module in steady state with N Ready Nodes (and their
// routes, on Hetzner Cloud), and of the cloud's official CCM when
// WASMCCM_HCLOUD_CCM (or WASMCCM_DO_CCM) names its binary. Not a timed
// test.
//
// It runs only when WASMCCM_REQUESTS is set; hack/requests.sh sets it.
// Settings, all from the environment:
//
//	WASMCCM_REQUESTS_CLOUD    hcloud (default) or digitalocean (no routes)
//	WASMCCM_REQUESTS_NODES    comma-separated N (default 60,1000,5000)
//	WASMCCM_REQUESTS_WINDOW   steady-state window (default 6m; at least
//	                          5m to hold a node status update; 0: none,
//	                          the run ends with its setup)
//	WASMCCM_REQUESTS_IMPLS    comma-separated: wasmccm, official (default
//	                          wasmccm, and official when the official CCM is set)
//	WASMCCM_HCLOUD_CCM        the official CCM's binary, for hcloud
//	WASMCCM_DO_CCM            the official CCM's binary, for digitalocean
//	                          (hack/build-do-ccm.sh builds it)
//	WASMCCM_REQUESTS_TIMEOUT  bound of each run's setup (default 40m)
//	WASMCCM_REQUESTS_POD_CIDRS  registration (default): each Node has its
//	                          pod CIDR from the start; initialized: the
//	                          Nodes get theirs once all are initialized
//	                          (requests.Options.PodCIDRsOnInit)
//	WASMCCM_REQUESTS_ROUTES   off: no route controller (Options.NoRoutes)
//	WASMCCM_REQUESTS_SERVICES Services of type LoadBalancer created once
//	                          the Nodes are initialized (Options.Services)
//	WASMCCM_REQUESTS_RATE_LIMIT  requests per hour the fake allows (429
//	                          beyond) and wasmccm's http.rateLimits
//	                          (Options.RateLimit); default none
//	WASMCCM_REQUESTS_OUT      file to write the results to, as JSON
func TestRequests(t *testing.T) {
	if os.Getenv("WASMCCM_REQUESTS") == "" {
		t.Skip("set WASMCCM_REQUESTS=1 (or run hack/requests.sh) to run the request-count benchmark")
	}
	var sizes []int
	for _, s := range strings.Split(envString("WASMCCM_REQUESTS_NODES", "60,1000,5000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			t.Fatalf("WASMCCM_REQUESTS_NODES: %q is not a positive number", s)
		}
		sizes = append(sizes, n)
	}
	window := envDuration(t, "WASMCCM_REQUESTS_WINDOW", 6*time.Minute)
	if window != 0 && window < requests.StatusPeriod {
		t.Logf("the window (%s) is shorter than the node status update period (%s): it may hold no update", window, requests.StatusPeriod)
	}
	cloud := requests.Cloud(envString("WASMCCM_REQUESTS_CLOUD", string(requests.Hcloud)))
	officialVar := map[requests.Cloud]string{requests.Hcloud: "WASMCCM_HCLOUD_CCM", requests.DigitalOcean: "WASMCCM_DO_CCM"}[cloud]
	if officialVar == "" {
		t.Fatalf("WASMCCM_REQUESTS_CLOUD=%q: want hcloud or digitalocean", cloud)
	}
	official := os.Getenv(officialVar)
	defaultImpls := "wasmccm"
	if official != "" {
		defaultImpls += ",official"
	}
	impls := strings.Split(envString("WASMCCM_REQUESTS_IMPLS", defaultImpls), ",")
	timeout := envDuration(t, "WASMCCM_REQUESTS_TIMEOUT", 40*time.Minute)
	var onInit bool
	switch v := envString("WASMCCM_REQUESTS_POD_CIDRS", "registration"); v {
	case "registration":
	case "initialized":
		onInit = true
	default:
		t.Fatalf("WASMCCM_REQUESTS_POD_CIDRS=%q: want registration or initialized", v)
	}

	noRoutes := false
	switch v := envString("WASMCCM_REQUESTS_ROUTES", "on"); v {
	case "on":
	case "off":
		noRoutes = true
	default:
		t.Fatalf("WASMCCM_REQUESTS_ROUTES=%q: want on or off", v)
	}
	services := envInt(t, "WASMCCM_REQUESTS_SERVICES", 0)
	rateLimit := envInt(t, "WASMCCM_REQUESTS_RATE_LIMIT", 0)

	var module string
	for _, impl := range impls {
		switch requests.Impl(impl) {
		case requests.Wasmccm:
			// The module as deployed: TinyGo, without a collector.
			path, err := wasmbuild.Build("../../modules/"+string(cloud)+"/module", wasmbuild.TinyGo)
			if err != nil {
				t.Fatal(err)
			}
			module = path
		case requests.Official:
			if official == "" {
				t.Fatalf("WASMCCM_REQUESTS_IMPLS names official: set %s to its binary", officialVar)
			}
		default:
			t.Fatalf("WASMCCM_REQUESTS_IMPLS: unknown %q (want wasmccm or official)", impl)
		}
	}

	var results []*requests.Result
	for _, n := range sizes {
		for _, impl := range impls {
			o := requests.Options{Cloud: cloud, Impl: requests.Impl(impl), Nodes: n, Window: window, Timeout: timeout, PodCIDRsOnInit: onInit,
				NoRoutes: noRoutes, Services: services, RateLimit: rateLimit}
			if o.Impl == requests.Official {
				o.Binary = official
			} else {
				o.Binary, o.Module = binaries.wasm, module
				o.CompilationCacheDir = filepath.Join(wasmbuild.CacheDir(), "compilation")
			}
			t.Run(fmt.Sprintf("%s-%d", impl, n), func(t *testing.T) { results = append(results, requests.Run(t, o)) })
		}
	}
	requests.Report(os.Stdout, results)
	if out := os.Getenv("WASMCCM_REQUESTS_OUT"); out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Error(err)
		}
	}
}
