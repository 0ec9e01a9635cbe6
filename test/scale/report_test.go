//go:build linux

package scale

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// report prints the results as a Markdown table, one column per variant
// and one per wasm variant's ratio to native.
func report(w io.Writer, s settings, results []*result) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Scale test: %d Nodes, %d LoadBalancer Services\n\n", s.Nodes, s.Services)
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
	refresh := func(f func(p *phase) float64) func(r *result) (float64, bool) {
		return func(r *result) (float64, bool) {
			if r.Refresh == nil {
				return 0, false
			}
			return f(r.Refresh), true
		}
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
		{"CCM CPU per minute, idle", dur(func(r *result) time.Duration { return r.IdlePerMinute }), "s"},
		{"node status refresh: pass duration", refresh(func(p *phase) float64 { return p.Done.Seconds() }), "s"},
		{"node status refresh: cloud requests", refresh(func(p *phase) float64 { return float64(p.requests()) }), ""},
		{"node status refresh: of which throttled", refresh(func(p *phase) float64 { return float64(p.RateLimited) }), ""},
		{"node status refresh: CCM CPU", refresh(func(p *phase) float64 { return p.CPU.Seconds() }), "s"},
		{"CCM peak RSS (VmHWM)", mib(func(r *result) int64 { return r.PeakRSS }), "MiB"},
		{"CCM CPU, whole run", dur(func(r *result) time.Duration { return r.TotalCPU }), "s"},
	}
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
