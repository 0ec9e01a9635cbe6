// Package provider implements k8s.io/cloud-provider's Interface over a
// wasmccm module: each method converts its Kubernetes arguments to ABI wire
// types, calls the module through runtime/host, and maps the answer back,
// errors included, to what the upstream controllers expect.
package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// ProviderName is the --cloud-provider name wasmccm registers.
const ProviderName = "wasm"

// Register makes provider "wasm" available to cloudprovider.InitCloudProvider.
func Register() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := ParseConfig(r)
		if err != nil {
			return nil, err
		}
		// cloudprovider.InitCloudProvider passes the opened --cloud-config;
		// its path lets a changed module.image be picked up.
		var configPath string
		if f, ok := r.(*os.File); ok {
			configPath = f.Name()
		}
		if err := useImage(context.Background(), cfg, configPath); err != nil {
			return nil, err
		}
		return New(context.Background(), cfg)
	})
}

// Backend answers the ABI's methods. A *host.Module is the backend of
// every real deployment; the same provider code linked into the host can
// be another, which is how benchmarks compare the two under identical
// controllers and error mapping.
type Backend interface {
	Call(ctx context.Context, export string, in, out abi.Message) error
	Info() host.Info
	Close(ctx context.Context) error
}

// Cloud is cloudprovider.Interface over a module. The module can be
// replaced at run time (see reload.go); the capabilities cannot, because
// the controllers decide at start-up which ones to run.
type Cloud struct {
	cfg          *Config
	backend      atomic.Pointer[Backend]
	capabilities host.Info
	// rollout is the module change in progress, nil when there is none:
	// the only thing the call path looks at beyond the backend.
	rollout atomic.Pointer[rollout]
	// loaded is the digest of the module in service, rejected the last
	// file refused: its digest when refused for its behaviour (shadow,
	// probation), what its checks read (moduleFile.checked) when a check
	// or the load failed. Only the reload goroutine touches them.
	loaded   string
	rejected string
	events   *moduleEvents
	// auth reports the credentials the host cannot apply; set by New.
	auth *authEvents
	// budget bounds Node deletions (deletionbudget.go); nil when disabled.
	budget *deletionBudget
	nodes  atomic.Pointer[nodeCache]
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

// New loads, verifies and starts the module cfg names. Any problem is an
// error naming it; the CCM refuses to start rather than run without its
// provider.
func New(ctx context.Context, cfg *Config) (*Cloud, error) {
	if err := applyMemoryBudget(cfg); err != nil {
		return nil, err
	}
	file, err := readModuleFile(cfg.Module)
	if err != nil {
		return nil, err
	}
	throttled := &rateEvents{}
	if cfg.HTTP.budget, err = host.NewRateBudget(cfg.HTTP.RateLimits, cfg.HTTP.AllowedOrigins, throttled.report); err != nil {
		return nil, fmt.Errorf("cloud-config: http: %w", err)
	}
	auth := &authEvents{}
	mod, err := host.New(ctx, file.wasm, auth.hostConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", cfg.Module.Path, err)
	}
	c := NewWithBackend(cfg, mod)
	c.auth = auth
	auth.cloud.Store(c)
	throttled.cloud.Store(c)
	c.loaded = file.digest
	klog.InfoS("provider module loaded", "path", cfg.Module.Path, "sha256", file.digest,
		"capabilities", mod.Info().Capabilities)
	return c, nil
}

// NewWithBackend returns a Cloud over any backend. Hot reload applies only
// to module backends made by New.
func NewWithBackend(cfg *Config, b Backend) *Cloud {
	c := &Cloud{cfg: cfg, capabilities: b.Info()}
	c.backend.Store(&b)
	c.budget = newDeletionBudget(cfg.Safety.MaxNodeDeletions, c.nodeCount)
	return c
}

func moduleName(path string) string { return filepath.Base(path) }

// call runs one export on the module in service. A call that picked the
// module just as a reload replaced it finds it closed and goes to the new
// one: a reload never fails a call. While a rollout is in progress the
// answer is also shown to it, after which the caller returns at once;
// otherwise the cost is one atomic load.
func (c *Cloud) call(ctx context.Context, export string, in, out abi.Message) error {
	for {
		b := c.backend.Load()
		err := (*b).Call(ctx, export, in, out)
		if errors.Is(err, host.ErrClosed) && c.backend.Load() != b {
			continue
		}
		if r := c.rollout.Load(); r != nil {
			r.observe(ctx, export, in, out, err)
		}
		return err
	}
}

// Initialize starts hot reload when configured, and the Events about
// reloads (on the CCM's Pod) and deferred Node deletions (on the Node and
// the Pod). Modules themselves get no client: they reach their cloud, not
// the cluster.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.events = newModuleEvents(clientBuilder)
	if c.cfg.Module.ReloadInterval.Duration > 0 && c.loaded != "" {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-stop; cancel() }()
		go c.watch(ctx, c.cfg.Module.ReloadInterval.Duration)
	}
}

// Close releases the module, and the other module of a rollout in
// progress.
func (c *Cloud) Close(ctx context.Context) error {
	if r := c.rollout.Swap(nil); r != nil {
		r.other.Close(ctx)
	}
	return (*c.backend.Load()).Close(ctx)
}

// ProviderName returns "wasm".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID reports true: a module is configured for one cluster, whose
// name it receives at init and with every load balancer and route call.
func (c *Cloud) HasClusterID() bool { return true }

func (c *Cloud) supports(capability abi.Capability) bool { return c.capabilities.Supports(capability) }

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
