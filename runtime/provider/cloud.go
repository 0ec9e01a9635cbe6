// Package provider implements k8s.io/cloud-provider's Interface over a
// wasmccm module, a file per sub-interface: each method converts its
// Kubernetes arguments to ABI wire types, calls the module through
// runtime/host, and maps the answer back, errors included, to what the
// upstream controllers expect.
//
// It also turns the cloud-config, parsed by runtime/cloudconfig, into the
// host's settings (config.go), reports Events on the
// CCM's Pod and Nodes (events.go, auth.go, ratelimit.go), and gathers the
// evidence the Node deletion policy asks for (nodes.go, deciding in
// runtime/deletion). Which module answers each call is runtime/lifecycle's
// (a lifecycle.Manager, given the means to load modules from the
// cloud-config's grants, to report Events and to know the Nodes); the
// memory budget checked at start is runtime/membudget's.
package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/deletion"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
	"github.com/wasmccm/wasmccm/runtime/membudget"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// ProviderName is the --cloud-provider name wasmccm registers.
const ProviderName = "wasm"

// Options are how a module is started beside its Config, by
// runtime/assembly for each module of the cloud-config.
type Options struct {
	// Name labels the module's metrics and prefixes its Events; default,
	// for a sole module, the module file's base name, unprefixed.
	Name string
	// Kube reaches the cluster for the last-known-good record; nil: none.
	Kube *rest.Config
	// Reread returns the module's Config as it is now, so that a changed
	// module.image is followed; nil: it is not.
	Reread func() (*cloudconfig.Config, error)
	// OtherModulesMiB is what the other modules of the process may cost
	// at most (MemoryBudget), counted in this module's budget.
	OtherModulesMiB int
	// Owns says which Nodes are the module's: the deletion budget counts
	// and probes only those, and rollouts compare answers about them
	// only. nil: every Node.
	Owns func(*v1.Node) bool
}

// Start loads and starts the module cfg names, as opts say: the module in
// service is the configured one or, when it cannot serve or a rollout is
// under way, the cluster's last-known-good.
func Start(ctx context.Context, cfg *cloudconfig.Config, opts Options) (*Cloud, error) {
	var store *modulefile.Store
	if opts.Kube != nil && !cfg.Module.LastKnownGood.Disabled {
		client, err := kubernetes.NewForConfig(rest.AddUserAgent(opts.Kube, "wasm-cloud-provider"))
		if err != nil {
			return nil, fmt.Errorf("last-known-good record: %w", err)
		}
		store = newLastKnownGoodStore(client.CoreV1(), cfg.Module.LastKnownGood)
	}
	// A module.image that cannot be pulled is, like a module file that
	// cannot be read, a reason to serve the last-known-good if there is
	// one (start).
	pullErr := useImage(ctx, cfg, opts.Reread)
	return start(ctx, cfg, opts, store, pullErr)
}

// Backend answers the ABI's methods (lifecycle.Backend).
type Backend = lifecycle.Backend

// Cloud is cloudprovider.Interface over a module. The module can be
// replaced at run time (runtime/lifecycle); the capabilities cannot,
// because the controllers decide at start-up which ones to run.
type Cloud struct {
	cfg *cloudconfig.Config
	// name labels the module's metrics (Options.Name).
	name string
	// owns says which Nodes are the module's; nil: every Node.
	owns func(*v1.Node) bool
	// modules answers each call with the module in service.
	modules *lifecycle.Manager
	events  *moduleEvents
	// auth reports the credentials the host cannot apply; set by New.
	auth *authEvents
	// rates is http.rateLimits' budget, nil without limits. Every module
	// generation gets this one, so that the module in service, a shadow
	// and a reloaded one spend one quota, as the cloud counts it.
	rates *egress.RateBudget
	// budget bounds Node deletions (runtime/deletion); nil when disabled.
	budget *deletion.Budget
	// control is the verdict of the last control probe (runtime/deletion).
	control deletion.ControlProbe
	nodes   atomic.Pointer[nodeCache]
	lbNodes lbNodeList
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
	_ cloudprovider.InstancesV2  = instancesV2{}
	_ cloudprovider.Instances    = instances{}
	_ cloudprovider.LoadBalancer = loadBalancer{}
	_ cloudprovider.Routes       = routes{}
	_ cloudprovider.Zones        = zones{}
	_ cloudprovider.Clusters     = clusters{}
)

// New loads, verifies and starts the module cfg names, without a
// last-known-good record: any problem is an error naming it.
func New(ctx context.Context, cfg *cloudconfig.Config) (*Cloud, error) {
	return start(ctx, cfg, Options{}, nil, nil)
}

// start puts the first module in service (lifecycle.Start), with the
// memory and rate budgets of the cloud-config applied. configuredErr is a
// problem found before reading the configured module (a failed pull).
func start(ctx context.Context, cfg *cloudconfig.Config, opts Options, store *modulefile.Store, configuredErr error) (*Cloud, error) {
	if err := applyMemoryBudget(cfg, opts.OtherModulesMiB, cfg.RollsOut(store != nil)); err != nil {
		return nil, err
	}
	name := orDefault(opts.Name, moduleName(cfg.Module.Path))
	throttled := &rateEvents{}
	rates, err := egress.NewRateBudget(name, cfg.HTTP.RateLimits, cfg.HTTP.AllowedOrigins, throttled.report)
	if err != nil {
		return nil, fmt.Errorf("cloud-config: http: %w", err)
	}
	c := newBareCloud(cfg, name)
	c.rates = rates
	c.owns = opts.Owns
	if opts.Name != "" {
		c.events.prefix = "module " + opts.Name + ": "
	}
	c.auth = &authEvents{}
	c.auth.cloud.Store(c)
	throttled.cloud.Store(c)
	source := cfg.Module.Path
	if cfg.Module.Image != "" {
		source = cfg.Module.Image
	}
	c.modules, err = lifecycle.Start(ctx, lifecycle.Options{
		Name: c.name, Path: cfg.Module.Path, Source: source, Trust: trust(cfg.Module),
		Rollout: cfg.Module.Rollout, ReloadInterval: cfg.Module.ReloadInterval.Duration, Record: store,
		Load: c.instantiate, Emit: c.events.emit, ListNodes: c.listNodes, ExistenceQuestion: c.existenceQuestion,
	}, configuredErr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// cgroupRoot is where the memory budget finds /proc and /sys; tests point
// it at a fake tree.
var cgroupRoot = "/"

// applyMemoryBudget refuses a configuration whose modules could need more
// memory than the container has, or lowers its pool size when
// limits.fitPoolToMemory allows it (runtime/membudget). othersMiB is what
// the process's other modules may cost.
func applyMemoryBudget(cfg *cloudconfig.Config, othersMiB int, twoCopies bool) error {
	wanted := MemoryBudget(cfg, twoCopies)
	wanted.OtherModulesMiB = othersMiB
	applied, err := membudget.Apply(wanted, cfg.Limits.FitPoolToMemory, cgroupRoot)
	if err != nil {
		return err
	}
	if applied.PoolSize != wanted.PoolSize {
		cfg.Limits.PoolSize = applied.PoolSize
	}
	return nil
}

// newBareCloud returns a Cloud with no module yet, labelled name.
func newBareCloud(cfg *cloudconfig.Config, name string) *Cloud {
	c := &Cloud{cfg: cfg, name: name, events: &moduleEvents{}}
	c.budget = deletion.NewBudget(name, cfg.Safety.MaxNodeDeletions)
	return c
}

// NewWithBackend returns a Cloud over any backend. Hot reload applies only
// to module backends made by New.
func NewWithBackend(cfg *cloudconfig.Config, b Backend) *Cloud {
	c := newBareCloud(cfg, moduleName(cfg.Module.Path))
	c.modules = lifecycle.Fixed(b)
	return c
}

func moduleName(path string) string { return filepath.Base(path) }

// call runs one export on the module in service (lifecycle.Manager.Call).
func (c *Cloud) call(ctx context.Context, export string, in, out abi.Message) error {
	return c.modules.Call(ctx, export, in, out)
}

// Initialize starts the Events about the module (on the CCM's Pod) and
// deferred Node deletions (on the Node and the Pod), and the reload
// goroutine when hot reload or the last-known-good record is on: it
// advances a rollout begun at start and records the module in service.
// Modules themselves get no client: they reach their cloud, not the
// cluster.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.events.start(clientBuilder)
	c.modules.Watch(stop)
}

// Close releases the module, and the other module of a rollout in
// progress.
func (c *Cloud) Close(ctx context.Context) error { return c.modules.Close(ctx) }

// ProviderName returns "wasm".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID reports true: a module is configured for one cluster, whose
// name it receives at init and with every load balancer and route call.
func (c *Cloud) HasClusterID() bool { return true }

func (c *Cloud) supports(capability abi.Capability) bool {
	return c.modules.Capabilities().Supports(capability)
}

// InstancesV2 is supported when the module exports it.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if !c.supports(abi.CapabilityInstancesV2) {
		return nil, false
	}
	return instancesV2{c}, true
}

// Instances is supported when the module exports the legacy interface.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) {
	if !c.supports(abi.CapabilityInstances) {
		return nil, false
	}
	return instances{c}, true
}

// LoadBalancer is supported when the module exports it.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if !c.supports(abi.CapabilityLoadBalancer) {
		return nil, false
	}
	return loadBalancer{c}, true
}

// Routes is supported when the module exports it.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if !c.supports(abi.CapabilityRoutes) {
		return nil, false
	}
	return routes{c}, true
}

// Zones is supported when the module exports it.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) {
	if !c.supports(abi.CapabilityZones) {
		return nil, false
	}
	return zones{c}, true
}

// Clusters is supported when the module exports it.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) {
	if !c.supports(abi.CapabilityClusters) {
		return nil, false
	}
	return clusters{c}, true
}
