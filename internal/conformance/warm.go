package conformance

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// The periods at which the upstream controllers call the provider in a
// cluster at rest, with their flags' defaults.
const (
	// nodeMonitorPeriod: the node lifecycle controller asks
	// InstanceExists, then InstanceShutdown, of every NotReady Node
	// (--node-monitor-period).
	nodeMonitorPeriod = 5 * time.Second
	// nodeStatusPeriod: the cloud node controller refreshes every Node's
	// InstanceMetadata (--node-status-update-frequency).
	nodeStatusPeriod = 5 * time.Minute
	// routePeriod: the route controller lists the routes
	// (--route-reconciliation-period).
	routePeriod = 10 * time.Second
)

// The warm phase's defaults: see SpecWarm.
const (
	defaultWarmPeriod      = 10 * time.Minute
	defaultWarmStateMaxAge = 10 * time.Second
)

// WarmReport is what the warm phase counted over its simulated period.
type WarmReport struct {
	// Period is the simulated time replayed; StateMaxAge how often, in
	// simulated time, the shared state was emptied.
	Period, StateMaxAge time.Duration
	// Kinds counts per call kind, Endpoints the requests per endpoint
	// (method and path template).
	Kinds     []WarmKind
	Endpoints map[string]int
	// RateLimit is the spec's rateLimit.perHour, 0 when it gives none.
	RateLimit int
	// Elapsed is the real time the phase took.
	Elapsed time.Duration
}

// WarmKind is one call kind of the warm phase.
type WarmKind struct {
	Method string
	Calls  int
	// Requests the calls made; Unrequested the calls served from what
	// the module kept (a round of concurrent calls that made no request);
	// Failed the calls that failed.
	Requests, Unrequested, Failed int
	// Cold is what the same calls cost, each from empty state.
	Cold int
}

// perHour extrapolates n, counted over the period, to one hour.
func (w *WarmReport) perHour(n int) int {
	if w.Period <= 0 {
		return 0
	}
	return int((float64(n) * float64(time.Hour) / float64(w.Period)) + 0.5)
}

// Totals returns the requests per hour of the phase and what the same
// calls would cost, each from empty state.
func (w *WarmReport) Totals() (warm, cold int) {
	for _, k := range w.Kinds {
		warm += k.Requests
		cold += k.Cold
	}
	return w.perHour(warm), w.perHour(cold)
}

// count records one call that made requests requests, where it would make
// cold from empty state; served says it was served from what the module
// kept.
func (w *WarmReport) count(method string, requests, cold int, served, failed bool) {
	i := slices.IndexFunc(w.Kinds, func(k WarmKind) bool { return k.Method == method })
	if i < 0 {
		w.Kinds = append(w.Kinds, WarmKind{Method: method})
		i = len(w.Kinds) - 1
	}
	k := &w.Kinds[i]
	k.Calls++
	k.Requests += requests
	k.Cold += cold
	if served {
		k.Unrequested++
	}
	if failed {
		k.Failed++
	}
}

func (w *WarmReport) write(b io.Writer) {
	fmt.Fprintf(b, "warm phase: %s of the CCM's calls replayed back to back in %s on one module, shared state kept (emptied every %s of simulated time); per hour:\n",
		w.Period, w.Elapsed.Round(time.Millisecond), w.StateMaxAge)
	fmt.Fprintf(b, "  %-22s %8s %10s %10s %18s\n", "call", "calls", "requests", "cold", "without a request")
	for _, k := range w.Kinds {
		fmt.Fprintf(b, "  %-22s %8d %10d %10d %18d", k.Method, w.perHour(k.Calls), w.perHour(k.Requests), w.perHour(k.Cold), w.perHour(k.Unrequested))
		if k.Failed > 0 {
			fmt.Fprintf(b, "  (%d failed)", w.perHour(k.Failed))
		}
		fmt.Fprintln(b)
	}
	endpoints := make([]string, 0, len(w.Endpoints))
	width := len("endpoint")
	for e := range w.Endpoints {
		endpoints = append(endpoints, e)
		width = max(width, len(e))
	}
	slices.SortFunc(endpoints, func(a, b string) int {
		return cmp.Or(cmp.Compare(w.Endpoints[b], w.Endpoints[a]), cmp.Compare(a, b))
	})
	fmt.Fprintf(b, "  %-*s %10s\n", width, "endpoint", "requests")
	for _, e := range endpoints {
		fmt.Fprintf(b, "  %-*s %10d\n", width, e, w.perHour(w.Endpoints[e]))
	}
	warm, cold := w.Totals()
	fmt.Fprintf(b, "  total %d requests per hour; %d if every call started from empty state", warm, cold)
	if w.RateLimit > 0 {
		fmt.Fprintf(b, "; the cloud's limit is %d (%d%%)", w.RateLimit, warm*100/w.RateLimit)
	}
	fmt.Fprintln(b)
}

// endpoint names a request by its method and path template: path segments
// holding a digit, other than an API version (v1), read {id}. A query API
// (POST /?Action=DescribeInstances) is named by its action.
func endpoint(ex Exchange) string {
	u, err := url.Parse(ex.URL)
	if err != nil {
		return ex.Method + " " + ex.URL
	}
	segments := strings.Split(u.Path, "/")
	for i, s := range segments {
		if strings.ContainsFunc(s, unicode.IsDigit) && !isVersion(s) {
			segments[i] = "{id}"
		}
	}
	e := ex.Method + " " + strings.Join(segments, "/")
	action := u.Query().Get("Action")
	if action == "" {
		form, _ := url.ParseQuery(ex.RequestBody)
		action = form.Get("Action")
	}
	if action != "" {
		e += "?Action=" + action
	}
	return e
}

func isVersion(s string) bool {
	return len(s) > 1 && s[0] == 'v' && strings.Trim(s[1:], "0123456789") == ""
}

// warmNode is a Node of the warm phase.
type warmNode struct {
	node     abi.Node
	notReady bool
	deleted  bool // the lifecycle controller deleted it
}

// warm replays the calls the CCM makes in a cluster at rest over the
// spec's simulated period, on a module of its own started as the CCM
// starts it (its pool size, so its coalescing), whose shared state is kept
// between calls and emptied every stateMaxAge of simulated time, as if
// everything the module keeps had aged out then: the calls run back to
// back, so the host's clock, by which the module's max-ages are measured,
// barely moves. Each round's calls run at once, as the controllers'
// workers make them.
func (r *runner) warm(poolSize int) {
	spec := r.spec.Warm
	if spec.Skip {
		r.skip(RuleWarmRateLimit, "warm phase", "warm.skip is set in the test spec")
		return
	}
	var nodes []*warmNode
	for _, sn := range r.spec.Nodes {
		if sn.ExpectError != "" || !r.info.Supports(abi.CapabilityInstancesV2) {
			continue
		}
		// A Node whose instance is gone or stopped has no kubelet to
		// report it Ready.
		notReady := !sn.Exists || sn.Shutdown != nil && *sn.Shutdown
		nodes = append(nodes, &warmNode{node: sn.node(), notReady: notReady})
	}
	routes := r.info.Supports(abi.CapabilityRoutes) && !r.spec.Routes.Skip
	if len(nodes) == 0 && !routes {
		r.skip(RuleWarmRateLimit, "warm phase", "the test spec lists no node the CCM would ask about, and there are no routes to list")
		return
	}
	start := time.Now()
	cfg := r.cfg
	cfg.PoolSize = poolSize
	mod, err := host.New(r.ctx, r.wasm, cfg)
	if err != nil {
		r.fail(RuleWarmRateLimit, "warm phase", "starting the module again failed: "+err.Error(), nil)
		return
	}
	defer mod.Close(r.ctx)
	w := &WarmReport{Period: spec.period(), StateMaxAge: spec.stateMaxAge(), Endpoints: map[string]int{}}
	if l := r.spec.RateLimit; l != nil {
		w.RateLimit = l.PerHour
	}
	ph := warmPhase{r: r, mod: mod, report: w, cold: map[string]int{}}
	clusterRoutes := &abi.RouteRequest{ClusterName: r.cluster}
	for _, n := range nodes {
		for _, export := range []string{abi.ExportInstanceExists, abi.ExportInstanceShutdown, abi.ExportInstanceMetadata} {
			ph.measureCold(export, n.node.Name, &n.node)
		}
	}
	if routes {
		ph.measureCold(abi.ExportListRoutes, "", clusterRoutes)
	}
	mod.ClearState()

	// The other controllers' periods are multiples of the monitor's.
	for t := time.Duration(0); t < w.Period; t += nodeMonitorPeriod {
		if t > 0 && t/w.StateMaxAge != (t-nodeMonitorPeriod)/w.StateMaxAge {
			mod.ClearState()
		}
		var notReady []*warmNode
		for _, n := range nodes {
			if n.notReady && !n.deleted {
				notReady = append(notReady, n)
			}
		}
		exists := ph.round(abi.ExportInstanceExists, notReady)
		var running []*warmNode
		for i, n := range notReady {
			if b, ok := exists[i].(*abi.Bool); ok {
				if *b {
					running = append(running, n)
				} else {
					n.deleted = true
				}
			}
		}
		ph.round(abi.ExportInstanceShutdown, running)
		if t%nodeStatusPeriod == 0 {
			ph.round(abi.ExportInstanceMetadata, slices.DeleteFunc(slices.Clone(nodes), func(n *warmNode) bool { return n.deleted }))
		}
		if routes && t%routePeriod == 0 {
			ph.call(abi.ExportListRoutes, clusterRoutes)
		}
	}
	w.Elapsed = time.Since(start)
	r.report.Warm = w

	warm, coldTotal := w.Totals()
	name := fmt.Sprintf("warm phase: %d requests per hour (%d from empty state)", warm, coldTotal)
	if w.RateLimit == 0 {
		r.skip(RuleWarmRateLimit, name, "the test spec gives no rateLimit.perHour")
		return
	}
	name += fmt.Sprintf(", within the cloud's %d", w.RateLimit)
	if warm > w.RateLimit {
		r.fail(RuleWarmRateLimit, name, fmt.Sprintf("the CCM's calls in a cluster at rest would cost %d requests per hour, over the cloud's limit of %d (rateLimit.perHour): keep what the calls share (a snapshot of the instances, say) in the shared state, and for longer", warm, w.RateLimit), nil)
		return
	}
	r.pass(RuleWarmRateLimit, name)
}

// warmPhase makes the warm phase's calls and counts their requests.
type warmPhase struct {
	r      *runner
	mod    *host.Module
	report *WarmReport
	// cold is what a call costs from empty state, by method and Node.
	cold map[string]int
}

// measureCold makes one call of export about node from empty state and
// records the requests it made.
func (ph *warmPhase) measureCold(export, node string, in abi.Message) {
	ph.mod.ClearState()
	mark := ph.r.ic.Mark()
	ph.r.with(ph.mod, func() *outcome { return ph.r.warmCall(export, in, outputOf(export)) })
	ph.cold[methodName(export)+"/"+node] = len(ph.r.ic.Since(mark))
}

// call makes one call of the phase and counts it.
func (ph *warmPhase) call(export string, in abi.Message) {
	mark := ph.r.ic.Mark()
	o := ph.r.with(ph.mod, func() *outcome { return ph.r.warmCall(export, in, outputOf(export)) })
	trace := ph.r.ic.Since(mark)
	ph.count(o.method, trace, len(trace), ph.cold[o.method+"/"], len(trace) == 0, !o.ok())
}

// round asks export of every Node at once, as the controllers' workers
// do, and returns each answer, nil for an error. Concurrent calls' requests
// cannot be told apart: the round's are shared out evenly among its calls,
// and a call counts as served from state only when the round made none.
func (ph *warmPhase) round(export string, nodes []*warmNode) []abi.Message {
	outs := make([]abi.Message, len(nodes))
	if len(nodes) == 0 {
		return outs
	}
	mark := ph.r.ic.Mark()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			outs[i] = outputOf(export)()
			errs[i] = ph.mod.Call(ph.r.ctx, export, &n.node, outs[i])
		})
	}
	wg.Wait()
	trace := ph.r.ic.Since(mark)
	method := methodName(export)
	for i := range nodes {
		// The first calls take the remainder, so the shares add up.
		share := len(trace) / len(nodes)
		if i < len(trace)%len(nodes) {
			share++
		}
		var endpoints []Exchange
		if i == 0 {
			endpoints = trace
		}
		ph.count(method, endpoints, share, ph.cold[method+"/"+nodes[i].node.Name], len(trace) == 0, errs[i] != nil)
		if errs[i] != nil {
			outs[i] = nil
		}
	}
	return outs
}

// count records a call that made requests requests, and the endpoints of
// trace.
func (ph *warmPhase) count(method string, trace []Exchange, requests, cold int, served, failed bool) {
	ph.report.count(method, requests, cold, served, failed)
	for _, ex := range trace {
		ph.report.Endpoints[endpoint(ex)]++
	}
}

// methodName is export's method name, e.g. InstanceExists.
func methodName(export string) string {
	if m, ok := abi.LookupMethod(export); ok {
		return m.Name
	}
	return export
}

// outputOf returns the constructor of export's result.
func outputOf(export string) func() abi.Message {
	switch export {
	case abi.ExportInstanceExists, abi.ExportInstanceShutdown:
		return newBool
	case abi.ExportInstanceMetadata:
		return newMetadata
	}
	return newRoutes
}
