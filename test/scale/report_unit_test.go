//go:build linux

package scale

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportRefreshWindow checks that the report prints the refresh
// window's requests by endpoint and its CPU, for each variant.
func TestReportRefreshWindow(t *testing.T) {
	window := func(listings int, cpu time.Duration) *phase {
		return &phase{Done: time.Minute, CPU: cpu, CloudRequests: map[string]int{"GET /v1/instances": listings}}
	}
	s := settings{Nodes: 5000, Services: 10, Refresh: true, RefreshWindow: time.Minute}
	results := []*result{
		{Variant: "native", Refresh: window(6, time.Second)},
		{Variant: "wasm-tinygo", Refresh: window(6, 2*time.Second)},
	}
	var out bytes.Buffer
	report(&out, s, results)
	for _, want := range []string{
		"| keeping Nodes current for 1m0s: GET /v1/instances | 6 | 6 | 1.00× |",
		"| keeping Nodes current for 1m0s: CCM CPU | 1.00 s | 2.00 s | 2.00× |",
		"| keeping Nodes current for 1m0s: CCM CPU per minute | 1.00 s | 2.00 s | 2.00× |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "idle") {
		t.Errorf("the report has an idle row though the refresh window replaced it:\n%s", out.String())
	}
}

// TestLogErrors checks that only klog error lines written after the
// offset, and not the test cluster's known noise, count as the CCM's
// errors.
func TestLogErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ccm.log")
	before := "E1126 08:00:00.000000       1 x.go:1] before the window\n"
	during := "I1126 08:01:00.000000       1 x.go:2] fine\n" +
		"Error: not a klog line\n" +
		"E1126 08:01:30.000000       1 configmap_cafile_content.go:246] \"Unhandled Error\"\n" +
		"E1126 08:02:00.000000       1 x.go:3] during the window\n"
	os.WriteFile(path, []byte(before+during), 0o644)
	errs := logErrors(t, path, int64(len(before)))
	if len(errs) != 1 || !strings.HasSuffix(errs[0], "during the window") {
		t.Errorf("logErrors = %q, want the one error line of the window", errs)
	}
}
