// Command report turns the output of the benchmarks in test/bench into the
// Markdown tables of BENCHMARKS.md: every export for the provider run
// natively and as Go and TinyGo modules with the ratio wasm/native, the
// ABI's own cost, start-up, pool throughput and the guest's work.
//
//	go test ./test/bench -run '^$' -bench . -benchmem -count=5 | tee bench.txt
//	go run ./test/bench/report bench.txt
//
// With -count above 1 every figure is the median of the runs.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results maps a benchmark name (without the -GOMAXPROCS suffix) to its
// metrics, each with one value per run.
type results struct {
	order   []string
	metrics map[string]map[string][]float64
	header  []string
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (*results, error) {
	res := &results{metrics: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, h := range []string{"goos:", "goarch:", "cpu:"} {
			if strings.HasPrefix(line, h) && !slices.Contains(res.header, line) {
				res.header = append(res.header, line)
			}
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		m := res.metrics[name]
		if m == nil {
			m = map[string][]float64{}
			res.metrics[name] = m
			res.order = append(res.order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// get returns the median of a metric of a benchmark.
func (r *results) get(name, metric string) (float64, bool) {
	vs := slices.Clone(r.metrics[name][metric])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

func (r *results) runs(name string) int { return len(r.metrics[name]["ns/op"]) }

// ---- formatting ----

func dur(ns float64, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func num(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	if v >= 100 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func bytesStr(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func ratio(v, base float64, ok, baseOK bool) string {
	if !ok || !baseOK || base == 0 {
		return "–"
	}
	if r := v / base; r < 10 {
		return fmt.Sprintf("%.2f×", r)
	}
	return fmt.Sprintf("%.0f×", v/base)
}

type table struct {
	title, note string
	header      []string
	rows        [][]string
}

func (t *table) print(w io.Writer) {
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### %s\n\n", t.title)
	if t.note != "" {
		fmt.Fprintf(w, "%s\n\n", t.note)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(t.header, " | "), strings.Repeat(" --- |", len(t.header)))
	for _, row := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// ---- tables ----

var variants = []string{"native", "wasm-go", "wasm-tinygo"}

func calls(r *results) *table {
	t := &table{
		title:  "Export round trip, cloud API answered in-process",
		header: []string{"export", "variant", "ns/op", "p50", "p99", "B/op", "allocs/op", "ns/op ÷ native", "p50 ÷ native"},
	}
	for _, export := range []string{"InstanceMetadata", "InstanceExists", "EnsureLoadBalancer"} {
		base := "BenchmarkCall/" + export + "/native"
		bns, bnsOK := r.get(base, "ns/op")
		b50, b50OK := r.get(base, "p50-ns")
		for _, v := range variants {
			name := "BenchmarkCall/" + export + "/" + v
			if r.runs(name) == 0 {
				continue
			}
			ns, nsOK := r.get(name, "ns/op")
			p50, p50OK := r.get(name, "p50-ns")
			p99, p99OK := r.get(name, "p99-ns")
			row := []string{export, v, dur(ns, nsOK), dur(p50, p50OK), dur(p99, p99OK),
				bytesStr(r.get(name, "B/op")), num(r.get(name, "allocs/op")), "", ""}
			if v != "native" {
				row[7], row[8] = ratio(ns, bns, nsOK, bnsOK), ratio(p50, b50, p50OK, b50OK)
			}
			t.rows = append(t.rows, row)
		}
	}
	return t
}

func lbNodes(r *results) *table {
	t := &table{
		title:  "EnsureLoadBalancer by number of Nodes (load balancer up to date)",
		header: []string{"Nodes", "native", "wasm-go", "wasm-tinygo", "wasm-go ÷ native", "wasm-tinygo ÷ native"},
	}
	for _, n := range []string{"50", "1000", "5000"} {
		var p50 [3]float64
		var ok [3]bool
		row := []string{n}
		present := false
		for i, v := range variants {
			name := "BenchmarkLoadBalancerNodes/nodes=" + n + "/" + v
			present = present || r.runs(name) > 0
			if len(r.metrics[name]["failed"]) > 0 {
				row = append(row, fmt.Sprintf("failed (%d of %d runs)", len(r.metrics[name]["failed"]), r.runs(name)))
				continue
			}
			p50[i], ok[i] = r.get(name, "p50-ns")
			row = append(row, dur(p50[i], ok[i])+" (p99 "+dur(r.get(name, "p99-ns"))+")")
		}
		if !present {
			continue
		}
		t.rows = append(t.rows, append(row, ratio(p50[1], p50[0], ok[1], ok[0]), ratio(p50[2], p50[0], ok[2], ok[0])))
	}
	return t
}

func abiOverhead(r *results) *table {
	t := &table{
		title:  "ABI overhead: exports answering constants",
		header: []string{"export", "variant", "ns/op", "p50", "p99", "B/op", "allocs/op"},
	}
	for _, export := range []string{"InstanceExists", "InstanceMetadata"} {
		for _, v := range variants[1:] {
			name := "BenchmarkABI/" + export + "/" + v
			if r.runs(name) == 0 {
				continue
			}
			t.rows = append(t.rows, []string{export, v, dur(r.get(name, "ns/op")), dur(r.get(name, "p50-ns")),
				dur(r.get(name, "p99-ns")), bytesStr(r.get(name, "B/op")), num(r.get(name, "allocs/op"))})
		}
	}
	return t
}

func startup(r *results) *table {
	t := &table{
		title:  "Start-up and instances (p50; simcloud module)",
		header: []string{"step", "go", "tinygo", "go allocated", "tinygo allocated"},
	}
	rows := []struct{ label, bench, metric string }{
		{"host.New, no compilation cache (compile + instantiate + init)", "BenchmarkLoad/cold/", "p50-ns"},
		{"host.New, compilation cache warm", "BenchmarkLoad/cached/", "p50-ns"},
		{"provider.New from .wasm.gz, cache warm (the CCM's start)", "BenchmarkStartup/", "p50-ns"},
		{"call on a fresh instance (instantiate + init + call)", "BenchmarkInstantiate/", "p50-ns"},
		{"the same call on a warm instance", "BenchmarkInstantiate/", "steady-p50-ns"},
		{"instantiate + init (difference)", "BenchmarkInstantiate/", "instantiate-ns"},
		{"first call after host.New", "BenchmarkFirstCall/", "p50-ns"},
	}
	for _, row := range rows {
		g, tg := row.bench+"go", row.bench+"tinygo"
		if r.runs(g) == 0 && r.runs(tg) == 0 {
			continue
		}
		cells := []string{row.label, dur(r.get(g, row.metric)), dur(r.get(tg, row.metric)), "", ""}
		if row.metric == "p50-ns" {
			cells[3], cells[4] = bytesStr(r.get(g, "B/op")), bytesStr(r.get(tg, "B/op"))
		}
		t.rows = append(t.rows, cells)
	}
	return t
}

func pool(r *results) *table {
	t := &table{
		title: "Pool throughput, InstanceMetadata, pool of 4 instances",
		note:  "calls/s, then per-call p50 / p99 (waiting for a free instance included).",
		header: []string{"cloud", "callers", "native", "wasm-go", "wasm-tinygo",
			"wasm-go ÷ native", "wasm-tinygo ÷ native"},
	}
	for _, load := range []string{"cpu", "latency=5ms"} {
		for _, callers := range []string{"1", "2", "4", "8"} {
			row := []string{load, callers}
			var tput [3]float64
			var have [3]bool
			for i, v := range variants {
				name := "BenchmarkPool/" + load + "/callers=" + callers + "/" + v
				tput[i], have[i] = r.get(name, "calls/s")
				row = append(row, fmt.Sprintf("%s/s (%s / %s)", num(tput[i], have[i]),
					dur(r.get(name, "p50-ns")), dur(r.get(name, "p99-ns"))))
			}
			if !have[0] && !have[1] && !have[2] {
				continue
			}
			row = append(row, ratio(tput[1], tput[0], have[1], have[0]), ratio(tput[2], tput[0], have[2], have[0]))
			t.rows = append(t.rows, row)
		}
	}
	return t
}

func guest(r *results) *table {
	t := &table{
		title: "Guest work, one unit per export call (p50)",
		note:  "wasm-go and wasm-tinygo: the module rewritten as runtime/host runs it, with its deadline and stack checks (runtime/host/internal/loopcheck); unchecked: the module as built, with no check.",
		header: []string{"work", "native", "wasm-go", "wasm-go unchecked", "wasm-tinygo", "wasm-tinygo unchecked",
			"go ÷ native", "tinygo ÷ native"},
	}
	var kinds []string
	for _, name := range r.order {
		if rest, ok := strings.CutPrefix(name, "BenchmarkGuest/"); ok {
			kind, _, _ := strings.Cut(rest, "/")
			if !slices.Contains(kinds, kind) {
				kinds = append(kinds, kind)
			}
		}
	}
	for _, kind := range kinds {
		get := func(v string) (float64, bool) { return r.get("BenchmarkGuest/"+kind+"/"+v, "p50-ns") }
		n, nOK := get("native")
		g, gOK := get("wasm-go")
		tg, tgOK := get("wasm-tinygo")
		t.rows = append(t.rows, []string{kind, dur(n, nOK), dur(g, gOK), dur(get("wasm-go-unchecked")),
			dur(tg, tgOK), dur(get("wasm-tinygo-unchecked")), ratio(g, n, gOK, nOK), ratio(tg, n, tgOK, nOK)})
	}
	return t
}

// others lists the benchmarks no table covers.
func others(r *results) *table {
	t := &table{title: "Other benchmarks", header: []string{"benchmark", "ns/op", "p50", "p99", "CPU/op", "allocs/op"}}
	for _, name := range r.order {
		known := false
		for _, prefix := range []string{"BenchmarkCall/", "BenchmarkABI/", "BenchmarkLoad/", "BenchmarkStartup/",
			"BenchmarkInstantiate/", "BenchmarkFirstCall/", "BenchmarkPool/", "BenchmarkGuest/", "BenchmarkLoadBalancerNodes/"} {
			known = known || strings.HasPrefix(name, prefix)
		}
		if !known {
			t.rows = append(t.rows, []string{name, dur(r.get(name, "ns/op")), dur(r.get(name, "p50-ns")),
				dur(r.get(name, "p99-ns")), dur(r.get(name, "cpu-ns/op")), num(r.get(name, "allocs/op"))})
		}
	}
	return t
}

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		var readers []io.Reader
		for _, path := range os.Args[1:] {
			f, err := os.Open(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			defer f.Close()
			readers = append(readers, f)
		}
		in = io.MultiReader(readers...)
	}
	r, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(r.order) == 0 {
		fmt.Fprintln(os.Stderr, "report: no benchmark results in the input")
		os.Exit(1)
	}
	runs := 0
	for _, name := range r.order {
		runs = max(runs, r.runs(name))
	}
	fmt.Printf("%s; %d run(s) per benchmark, medians shown.\n", strings.Join(r.header, ", "), runs)
	tables := []*table{calls(r), lbNodes(r), abiOverhead(r), startup(r), pool(r), guest(r)}
	tables = append(tables, others(r))
	for _, t := range tables {
		t.print(os.Stdout)
	}
}
