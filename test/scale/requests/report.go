package requests

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report prints the results as Markdown, one table per number of Nodes:
// requests per hour by endpoint and in total for each implementation, and
// wasmccm's ratio to the official CCM when both ran.
func Report(w io.Writer, results []*Result) {
	var sizes []int
	for _, r := range results {
		if !slices.Contains(sizes, r.Nodes) {
			sizes = append(sizes, r.Nodes)
		}
	}
	slices.Sort(sizes)
	for _, r := range results {
		if r.Services > 0 || r.RateLimit > 0 {
			reportSetup(w, r)
		}
	}
	for _, n := range sizes {
		var rs []*Result
		var wasm, official *Result
		for _, r := range results {
			if r.Nodes != n {
				continue
			}
			rs = append(rs, r)
			switch r.Impl {
			case Wasmccm:
				wasm = r
			case Official:
				official = r
			}
		}
		if rs[0].Window == 0 {
			continue // setup only
		}
		fmt.Fprintf(w, "\n#### %d Nodes: cloud requests per hour in steady state\n\n", n)
		header := []string{"endpoint"}
		for _, r := range rs {
			header = append(header, string(r.Impl)+" req/h")
		}
		ratio := wasm != nil && official != nil
		if ratio {
			header = append(header, "wasmccm ÷ official")
		}
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
		row := func(name string, count func(r *Result) int) {
			cells := []string{name}
			for _, r := range rs {
				cells = append(cells, fmt.Sprintf("%.0f", r.PerHour(count(r))))
			}
			if ratio {
				cells = append(cells, ratioCell(wasm.PerHour(count(wasm)), official.PerHour(count(official))))
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		for _, e := range Endpoints(rs) {
			row("`"+e+"`", func(r *Result) int { return r.Requests[e] })
		}
		row("**total**", func(r *Result) int { return r.Total() })
		fmt.Fprintln(w)
		for _, r := range rs {
			cidrs := "pod CIDRs at registration"
			if r.PodCIDRsOnInit {
				cidrs = "pod CIDRs once all Nodes were initialized"
			}
			fmt.Fprintf(w, "- %s (%s): window %s, %d requests in it; %d node status pass(es) began in it; setup %s, %d requests; "+
				"CPU in the window: CCM %s, kube-apiserver %s; RSS at its end: CCM %d MiB, kube-apiserver %d MiB; %d CCM error log lines in it\n",
				r.Impl, cidrs, r.Window.Round(time.Second), r.Total(), r.StatusPasses, r.Setup.Round(time.Second), sum(r.SetupRequests),
				r.CCMCPU.Round(10*time.Millisecond), r.APIServerCPU.Round(10*time.Millisecond), r.CCMRSS>>20, r.APIServerRSS>>20, r.ErrorLines)
		}
	}
}

func ratioCell(a, b float64) string {
	switch {
	case a == 0 && b == 0:
		return "="
	case b == 0:
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// reportSetup prints what a run's setup took: its phases' times, its
// requests by endpoint, and what went wrong (429s, Nodes deleted).
func reportSetup(w io.Writer, r *Result) {
	limit := "no rate limit"
	if r.RateLimit > 0 {
		limit = fmt.Sprintf("rate limit %d/hour (the fake refuses beyond it; wasmccm's http.rateLimits the same)", r.RateLimit)
	}
	routes := "routes"
	if r.NoRoutes {
		routes = "no routes"
	}
	fmt.Fprintf(w, "\n#### Setup, %s: %d Nodes, %d load balancers, %s, %s\n\n", r.Impl, r.Nodes, r.Services, routes, limit)
	fmt.Fprintf(w, "- Nodes registered to all initialized: %s\n", r.Initialized.Round(time.Second))
	if r.Services > 0 {
		fmt.Fprintf(w, "- Services created to every load balancer's address: %s\n", r.LoadBalancers.Round(time.Second))
	}
	fmt.Fprintf(w, "- CCM start to the end of the setup: %s, %d cloud requests; %d refused with 429 by the fake; %d Nodes deleted\n\n",
		r.Setup.Round(time.Second), sum(r.SetupRequests), r.Throttled, r.NodesDeleted)
	fmt.Fprintf(w, "| endpoint | requests |\n| --- | --- |\n")
	for _, e := range slices.Sorted(maps.Keys(r.SetupRequests)) {
		fmt.Fprintf(w, "| `%s` | %d |\n", e, r.SetupRequests[e])
	}
}
