// Package conformance checks a provider module against the rules that keep
// clusters safe, by running it in the real host against the author's cloud
// (or a fake of it) and injecting faults into its HTTP requests in the
// host's HTTP layer: 5xx, 429 with Retry-After, connection reset, timeout,
// truncated body, 401, 403 and 400, one request at a time, the second and
// later requests of a call (page 2 of a listing) too. The module cannot
// tell an injected fault from the cloud's own, so what it answers is what
// it would answer in production.
//
// Every answer on which an upstream controller deletes, taints or gives up
// something is checked under every fault: InstanceExists false, NotFound
// from InstanceMetadata, InstanceShutdown, InstanceID and
// GetZoneByProviderID, InstanceShutdown true, GetLoadBalancer exists=false,
// a create by EnsureLoadBalancer of one that exists, ListRoutes missing or
// blackholing a route, and the success of EnsureLoadBalancerDeleted and
// DeleteRoute, which must rest on the cloud's own 2xx or 404 to a
// destroying request as the interceptor saw it.
//
// What a call does to the cloud is judged too, whatever the API's shape:
// the test load balancer is read through the module (GetLoadBalancer, and
// its lister when exported) before and after every EnsureLoadBalancer and
// UpdateLoadBalancer of it, clean and faulted, and must still be there,
// unchanged (lb-preserved). Every call must answer before its deadline
// (call-deadline); a clean mutating call that answers RetryAfter is made
// again after it, as the controllers do, which lets a slow cloud (the
// spec's slowCloud) act across calls.
//
// Every checked call starts from empty shared state, so that it reaches
// the cloud and can be faulted. The warm phase (warm.go) then measures what
// the module costs as the CCM runs it: the controllers' calls of a cluster
// at rest, state kept, counted per call kind and endpoint.
//
// Requests reach the cloud at Options.Rate; the cloud's own 429s are
// waited out and reported, never scored against the module.
//
// The rules are the table Rules (rules.go): each its name, what it checks
// as the docs say it, and, for a rule one call can break, its judge,
// which takes the call's outcome, the injected fault and what the suite
// knew before the call (a callCase), and returns structured evidence from
// which the failure message is rendered (judges.go). The docs' table says
// where each rule is checked, its judge or the sequences that report it,
// as rulesites_test.go reads them from the code into rulesites.go. Every
// faulted call is judged by every rule of the table. Every failure names
// its rule and the exact requests and answers of the call that broke it,
// bodies included.
//
// The runner's mechanics (call, warmCall, check, underFaults) are in
// runner.go; the checks, by area, in instances.go, loadbalancer.go,
// lblist.go, routes.go and credentials.go; the warm phase in warm.go.
package conformance

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// Options is one run.
type Options struct {
	// Name labels the module in the report, e.g. its file name.
	Name string
	Wasm []byte
	// Host is the module's configuration as the CCM would run it, from the
	// cloud-config. The suite adds its hooks and runs one instance, so the
	// module's requests are seen in order.
	Host host.Config
	Spec *Spec
	// Secrets are the values of the Secret keys the module's credentials
	// name, searched for in its logs, errors, results and request URLs,
	// and redacted from the report, in every form and from the length the
	// host searches answers for (credentials.SecretSet); those of the
	// spec's limited credentials too.
	Secrets []string
	// Rate paces the requests sent to the cloud, per second; 0 sends them
	// at once. The cloud's own 429s are waited out whatever the rate.
	Rate float64
	// MaxRequests caps the requests sent to the cloud; 0 sends them all.
	// Checks after the cap is reached are skipped, not scored.
	MaxRequests int
}

// Run runs every check. An error means the module could not be run at all.
func Run(ctx context.Context, opts Options) (*Report, error) {
	start := time.Now()
	ic := NewInterceptor(opts.Secrets)
	r := &runner{ctx: ctx, spec: opts.Spec, wasm: opts.Wasm, cluster: cmp.Or(opts.Host.ClusterName, "kubernetes"), ic: ic, secrets: ic.secrets,
		report: &Report{Module: opts.Name, secrets: ic.secrets}}
	r.ic.SetRate(opts.Rate)
	r.ic.SetMaxRequests(opts.MaxRequests)
	defer func() {
		r.report.Throttled = r.ic.Throttled()
		r.report.Requests, r.report.Capped = r.ic.Sent()
		r.report.MaxRequests = opts.MaxRequests
	}()
	if r.spec == nil {
		r.spec = &Spec{}
	}
	info, problems := host.Validate(ctx, opts.Wasm, opts.Host.CompilationCacheDir)
	if len(problems) > 0 {
		r.fail(RuleCapabilities, "module validates", "the module does not validate:\n- "+strings.Join(problems, "\n- "), nil)
		r.report.Duration = time.Since(start)
		return r.report, nil
	}
	caps, optional := Exports(info)
	r.pass(RuleCapabilities, "module validates: capabilities "+caps+"; optional exports "+optional)

	cfg := opts.Host
	cfg.ClusterName = r.cluster
	r.settle = defaultSettle
	if sc := r.spec.SlowCloud; sc != nil {
		cfg.CallTimeout, r.settle, r.retryWait = sc.durations()
	}
	r.callTimeout = cmp.Or(cfg.CallTimeout, host.Defaults().CallTimeout)
	cfg.PoolSize = 1
	cfg.HTTP.Wrap = r.ic.Wrap
	cfg.Log = r.logLine
	mod, err := host.New(ctx, opts.Wasm, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the module: %w", err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	r.mod, r.info, r.cfg = mod, info, cfg
	if lc := r.spec.LimitedCredentials; lc != nil {
		limited := cfg
		limited.Credentials.Dir = lc.Dir
		if r.limited, err = host.New(ctx, opts.Wasm, limited); err != nil {
			return nil, fmt.Errorf("starting the module with the limited credentials: %w", err)
		}
		defer r.limited.Close(context.WithoutCancel(ctx))
	}

	if info.Supports(abi.CapabilityInstancesV2) {
		r.instances()
	} else {
		r.skip(RuleInstances, "InstancesV2", "the module does not export InstancesV2")
	}
	if !info.Supports(abi.CapabilityLoadBalancer) {
		r.skip(RuleLBLifecycle, "LoadBalancer", "the module does not export LoadBalancer")
	} else if r.spec.LoadBalancer.Skip {
		r.skip(RuleLBLifecycle, "LoadBalancer", "loadBalancer.skip is set in the test spec")
	} else {
		r.loadBalancer()
		r.loadBalancerList()
	}
	if !info.Supports(abi.CapabilityRoutes) {
		r.skip(RuleRoutes, "Routes", "the module does not export Routes")
	} else if r.spec.Routes.Skip {
		r.skip(RuleRoutes, "Routes", "routes.skip is set in the test spec")
	} else {
		r.routes()
	}
	r.warm(opts.Host.PoolSize)
	if r.limited != nil {
		r.limitedInstances()
	}
	r.deadlines()
	r.leaks(opts.Secrets)
	r.rawCredentials()
	r.report.Duration = time.Since(start)
	return r.report, nil
}

type runner struct {
	ctx  context.Context
	mod  *host.Module
	info host.Info
	// wasm and cfg start the module again, for another cluster.
	wasm []byte
	cfg  host.Config
	// cluster is the cluster name the module runs for: its init's and
	// every call's.
	cluster string
	// callTimeout is the deadline of every call; settle and retryWait
	// bound the calls again after RetryAfter (call).
	callTimeout, settle, retryWait time.Duration
	// calls counts the calls made; slowest is the one that took longest.
	calls   int
	slowest *outcome
	// cappedNoted says the report has the line for the request cap.
	cappedNoted bool
	// limited runs the module with the spec's limited credentials.
	limited *host.Module
	spec    *Spec
	ic      *Interceptor
	secrets *credentials.SecretSet
	report  *Report

	mu         sync.Mutex
	leakedLogs []string
	// texts are the module's errors and results, searched for secrets.
	texts []text
}

type text struct{ where, s string }

// logLine keeps the module's log lines that hold a credential; a module
// that floods its log cannot make the run hold every line.
func (r *runner) logLine(level abi.LogLevel, msg string) {
	if !r.secrets.Holds(msg) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leakedLogs = append(r.leakedLogs, "log line "+level.String()+": "+msg)
}
