//go:build linux

package scale

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// provenance says when, how and where the results were produced.
type provenance struct {
	Date      time.Time
	Command   string
	CPUs      int
	CPUModel  string
	Memory    int64 // bytes, MemTotal
	GoVersion string
}

func currentProvenance() provenance {
	return provenance{Date: time.Now().UTC().Truncate(time.Second), Command: command(), CPUs: runtime.NumCPU(),
		CPUModel: procField("/proc/cpuinfo", "model name"), Memory: memTotal(), GoVersion: runtime.Version()}
}

// command is WASMCCM_SCALE_COMMAND, or else the go test command that
// repeats this run: the test's variables and the package's TestScale.
func command() string {
	if c := os.Getenv("WASMCCM_SCALE_COMMAND"); c != "" {
		return c
	}
	var vars []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WASMCCM_SCALE") || strings.HasPrefix(kv, "WASMCCM_E2E=") {
			name, value, _ := strings.Cut(kv, "=")
			vars = append(vars, name+"="+strconv.Quote(value))
		}
	}
	slices.Sort(vars)
	return strings.Join(append(vars, "go test ./test/scale -run '^TestScale$' -count=1 -v"), " ")
}

// procField returns the value of the first "key : value" line of a /proc
// file, or "" if there is none.
func procField(path, key string) string {
	b, _ := os.ReadFile(path)
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// memTotal is the machine's memory in bytes, 0 if unknown.
func memTotal() int64 {
	kib, _ := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64)
	return kib << 10
}

// report prints the results as a Markdown table, one column per variant
// and one per wasm variant's ratio to native. Where and how the run was
// made is not in it: the JSON results and the result file's head
// (hack/scale.sh) hold that.
func report(w io.Writer, s settings, results []*result) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "### Scale test: %d Nodes, %d LoadBalancer Services\n\n", s.Nodes, s.Services)
	fmt.Fprintf(w, "Cloud: %s per request, rate limit %g req/s (burst %d). Module pool: %d instances.\n",
		s.Latency, s.Rate, s.RateBurst, s.PoolSize)
	fmt.Fprintf(w, "CCM flags: %s\n\n", strings.Join(results[0].Flags, " "))

	var native *result
	for _, r := range results {
		if r.Variant == "native" {
			native = r
		}
	}
	header := []string{"measure"}
	for _, r := range results {
		header = append(header, r.Variant)
	}
	if native != nil {
		for _, r := range results {
			if r != native {
				header = append(header, r.Variant+" / native")
			}
		}
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))

	type row struct {
		name  string
		value func(r *result) (float64, bool) // value, present
		unit  string                          // "s", "MiB" or "" (count)
	}
	dur := func(f func(r *result) time.Duration) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) { return f(r).Seconds(), true }
	}
	count := func(f func(r *result) int) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) { return float64(f(r)), true }
	}
	mib := func(f func(r *result) int64) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) { return float64(f(r)) / (1 << 20), true }
	}
	idle := func(r *result) (float64, bool) { return r.IdlePerMinute.Seconds(), r.Refresh == nil }
	refresh := func(f func(p *phase) float64) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) {
			if r.Refresh == nil {
				return 0, false
			}
			return f(r.Refresh), true
		}
	}
	window := fmt.Sprintf("keeping Nodes current for %s", s.RefreshWindow)
	endpoints := map[string]bool{}
	for _, r := range results {
		if r.Refresh != nil {
			for e := range r.Refresh.CloudRequests {
				endpoints[e] = true
			}
		}
	}
	var endpointRows []row
	for _, e := range slices.Sorted(maps.Keys(endpoints)) {
		endpointRows = append(endpointRows, row{window + ": " + e,
			refresh(func(p *phase) float64 { return float64(p.CloudRequests[e]) }), ""})
	}
	rows := []row{
		{"CCM start-up (exec to /healthz OK)", dur(func(r *result) time.Duration { return r.Startup }), "s"},
		{"CCM CPU during start-up", dur(func(r *result) time.Duration { return r.StartCPU }), "s"},
		{"CCM RSS after start-up", mib(func(r *result) int64 { return r.StartRSS }), "MiB"},
		{fmt.Sprintf("all %d Nodes initialized after", s.Nodes), dur(func(r *result) time.Duration { return r.Nodes.Done }), "s"},
		{"per Node, creation to initialized, p50", dur(func(r *result) time.Duration { return r.Nodes.P50 }), "s"},
		{"per Node, creation to initialized, p99", dur(func(r *result) time.Duration { return r.Nodes.P99 }), "s"},
		{"cloud requests, Nodes phase", count(func(r *result) int { return r.Nodes.requests() }), ""},
		{"of which throttled (429)", count(func(r *result) int { return r.Nodes.RateLimited }), ""},
		{"CCM CPU, Nodes phase", dur(func(r *result) time.Duration { return r.Nodes.CPU }), "s"},
		{fmt.Sprintf("all %d Services with ingress IP after", s.Services), dur(func(r *result) time.Duration { return r.Services.Done }), "s"},
		{"per Service, creation to ingress IP, p50", dur(func(r *result) time.Duration { return r.Services.P50 }), "s"},
		{"per Service, creation to ingress IP, p99", dur(func(r *result) time.Duration { return r.Services.P99 }), "s"},
		{"cloud requests, Services phase", count(func(r *result) int { return r.Services.requests() }), ""},
		{"of which throttled (429)", count(func(r *result) int { return r.Services.RateLimited }), ""},
		{"CCM CPU, Services phase", dur(func(r *result) time.Duration { return r.Services.CPU }), "s"},
		{"CCM CPU per minute, idle", idle, "s"},
		{window + ": cloud requests", refresh(func(p *phase) float64 { return float64(p.requests()) }), ""},
	}
	rows = append(rows, endpointRows...)
	rows = append(rows, []row{
		{window + ": of which throttled", refresh(func(p *phase) float64 { return float64(p.RateLimited) }), ""},
		{window + ": CCM CPU", refresh(func(p *phase) float64 { return p.CPU.Seconds() }), "s"},
		{window + ": CCM CPU per minute", refresh(func(p *phase) float64 { return perMinute(p.CPU, p.Done).Seconds() }), "s"},
		{"CCM peak RSS (VmHWM)", mib(func(r *result) int64 { return r.PeakRSS }), "MiB"},
		{"CCM CPU, whole run", dur(func(r *result) time.Duration { return r.TotalCPU }), "s"},
	}...)
	for _, rw := range rows {
		cells := []string{rw.name}
		present := false
		for _, r := range results {
			v, ok := rw.value(r)
			if !ok {
				cells = append(cells, "–")
				continue
			}
			present = true
			cells = append(cells, format(v, rw.unit))
		}
		if !present {
			continue
		}
		if native != nil {
			base, _ := rw.value(native)
			for _, r := range results {
				if r == native {
					continue
				}
				v, ok := rw.value(r)
				switch {
				case !ok:
					cells = append(cells, "–")
				case base == 0 && v == 0:
					cells = append(cells, "=")
				case base == 0:
					cells = append(cells, "n/a")
				default:
					cells = append(cells, fmt.Sprintf("%.2f×", v/base))
				}
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, r := range results {
		if len(r.Services.CloudRequests) > 0 || len(r.Nodes.CloudRequests) > 0 {
			fmt.Fprintf(w, "%s cloud requests by endpoint: Nodes %v; Services %v\n", r.Variant, r.Nodes.CloudRequests, r.Services.CloudRequests)
		}
	}
}

func format(v float64, unit string) string {
	switch unit {
	case "s":
		if v < 1 {
			return fmt.Sprintf("%.0f ms", v*1000)
		}
		return fmt.Sprintf("%.2f s", v)
	case "MiB":
		return fmt.Sprintf("%.0f MiB", v)
	}
	return fmt.Sprintf("%.0f", v)
}
