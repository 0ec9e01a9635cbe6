// Package provider implements k8s.io/cloud-provider's Interface over a
// wasmccm module: each method converts its Kubernetes arguments to ABI wire
// types, calls the module through runtime/host, and maps the answer back,
// errors included, to what the upstream controllers expect.
//
// It also parses the cloud-config (config.go), reports Events on the
// CCM's Pod and Nodes (events.go, auth.go, ratelimit.go), gathers the
// evidence the Node deletion policy asks for (nodes.go, deciding in
// runtime/deletion), and carries out the module's lifecycle: loading at
// start and on hot reload, shadow calls, promotion, rollback and the
// last-known-good record (reload.go, rollout.go, lastknowngood.go,
// image.go), whose decisions are runtime/lifecycle's. The memory budget
// checked at start is runtime/membudget's.
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/deletion"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
	"github.com/wasmccm/wasmccm/runtime/membudget"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// ProviderName is the --cloud-provider name wasmccm registers.
const ProviderName = "wasm"

// Open starts provider "wasm" as the CCM does: from the --cloud-config
// file at cloudConfigPath, with the cluster reached through kube (nil: no
// last-known-good record). The path lets a changed module.image be picked
// up.
func Open(ctx context.Context, cloudConfigPath string, kube *rest.Config) (*Cloud, error) {
	f, err := os.Open(cloudConfigPath)
	if err != nil {
		return nil, fmt.Errorf("opening cloud-config: %w", err)
	}
	cfg, err := ParseConfig(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	var store *modulefile.Store
	if kube != nil && !cfg.Module.LastKnownGood.Disabled {
		client, err := kubernetes.NewForConfig(rest.AddUserAgent(kube, "wasm-cloud-provider"))
		if err != nil {
			return nil, fmt.Errorf("last-known-good record: %w", err)
		}
		store = newLastKnownGoodStore(client.CoreV1(), cfg.Module.LastKnownGood)
	}
	// A module.image that cannot be pulled is, like a module file that
	// cannot be read, a reason to serve the last-known-good if there is
	// one (start).
	pullErr := useImage(ctx, cfg, cloudConfigPath)
	return start(ctx, cfg, store, pullErr)
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
	// served is the module in service, since servedSince; refused the
	// last file refused (reload.go). Only the reload goroutine touches
	// them once the CCM runs.
	served      modulefile.File
	servedSince time.Time
	refused     refusal
	// lastKnownGood is the record (lastknowngood.go), nil without one;
	// recorded is the digest it holds, recordFailed the digest whose
	// recording failed last.
	lastKnownGood          *modulefile.Store
	recorded, recordFailed string
	events                 *moduleEvents
	// auth reports the credentials the host cannot apply; set by New.
	auth *authEvents
	// budget bounds Node deletions (runtime/deletion); nil when disabled.
	budget *deletion.Budget
	// control is the verdict of the last control probe (runtime/deletion).
	control deletion.ControlProbe
	nodes   atomic.Pointer[nodeCache]
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
func New(ctx context.Context, cfg *Config) (*Cloud, error) {
	return start(ctx, cfg, nil, nil)
}

// start puts the first module in service, as lifecycle.DecideStart
// decides: the configured one, or the last-known-good one while the
// configured one is rolled out as a hot reload would be or, when it
// cannot be read, verified or loaded, rejected. Only when neither can
// serve does the CCM refuse to start. configuredErr is a problem found
// before reading the configured module (a failed pull).
func start(ctx context.Context, cfg *Config, store *modulefile.Store, configuredErr error) (*Cloud, error) {
	if err := applyMemoryBudget(cfg, cfg.Module.ReloadInterval.Duration > 0 || store != nil); err != nil {
		return nil, err
	}
	throttled := &rateEvents{}
	var err error
	if cfg.HTTP.budget, err = host.NewRateBudget(cfg.HTTP.RateLimits, cfg.HTTP.AllowedOrigins, throttled.report); err != nil {
		return nil, fmt.Errorf("cloud-config: http: %w", err)
	}
	c := newBareCloud(cfg)
	c.lastKnownGood = store
	c.auth = &authEvents{}
	c.auth.cloud.Store(c)
	throttled.cloud.Store(c)

	var file modulefile.File
	var configured Backend
	if configuredErr == nil {
		file, configuredErr = readModuleFile(cfg.Module)
	}
	if configuredErr == nil {
		if configured, configuredErr = c.instantiate(ctx, file, false); configuredErr != nil {
			configuredErr = fmt.Errorf("module %s: %w", cfg.Module.Path, configuredErr)
		}
	}
	var record *modulefile.Record
	var recordErr error
	if store != nil {
		record, recordErr = store.Load(ctx)
	}
	facts := lifecycle.StartFacts{HasRecord: record != nil, ConfiguredUsable: configuredErr == nil}
	facts.SameDigest = facts.HasRecord && facts.ConfiguredUsable && record.Digest == file.Digest
	var recordFile modulefile.File
	var recorded Backend
	if lifecycle.NeedsRecorded(facts) {
		recordFile, recorded, recordErr = c.loadRecorded(ctx, record)
		facts.RecordedUsable = recordErr == nil
		facts.SameCapabilities = facts.RecordedUsable && facts.ConfiguredUsable &&
			slices.Equal(recorded.Info().Capabilities, configured.Info().Capabilities)
	}
	reason, ok := lifecycle.DecideStart(facts)
	if !ok {
		return nil, neitherServes(configuredErr, recordErr)
	}
	if reason.ServesConfigured() {
		c.startServing(configured, file, reason, record)
	} else {
		c.startServing(recorded, recordFile, reason, record)
	}
	switch reason {
	case lifecycle.FirstInstall:
		c.noteFirstInstall(recordErr)
	case lifecycle.LastKnownGoodUnusable:
		c.warnStart(fmt.Sprintf("module %s serves without a shadow period: the last-known-good module cannot stand in for it: %v", file.Digest, recordErr))
	case lifecycle.ConfiguredUnusable:
		c.refused = checksFailed(file, configuredErr)
		reloads.WithLabelValues("rejected").Inc()
		c.warnStart(fmt.Sprintf("configured module rejected at start, last-known-good %s (recorded %s) serves: %v", record.Digest, record.RecordedAt, configuredErr))
	case lifecycle.CapabilitiesChanged:
		recorded.Close(ctx)
		c.warnStart(fmt.Sprintf("module %s serves without a shadow period: its capabilities %v differ from the last-known-good's %v, and the controllers start with the configured ones",
			file.Digest, configured.Info().Capabilities, recorded.Info().Capabilities))
	case lifecycle.Shadowing:
		klog.InfoS("the configured module differs from the last-known-good, which serves while the configured one is rolled out",
			"configuredSHA256", file.Digest, "lastKnownGoodSHA256", record.Digest, "recordedAt", record.RecordedAt)
		c.startRollout(configured, file)
	}
	return c, nil
}

// cgroupRoot is where the memory budget finds /proc and /sys; tests point
// it at a fake tree.
var cgroupRoot = "/"

// applyMemoryBudget refuses a configuration whose modules could need more
// memory than the container has, or lowers its pool size when
// limits.fitPoolToMemory allows it (runtime/membudget). twoModules: a
// rollout, at start or by hot reload, runs two modules at once.
func applyMemoryBudget(cfg *Config, twoModules bool) error {
	copies := 1
	if twoModules {
		copies = 2
	}
	l := cfg.Limits
	wanted := membudget.New(l.PoolSize, int(l.MemoryLimitMiB), int(l.SharedStateMiB), copies)
	applied, err := membudget.Apply(wanted, l.FitPoolToMemory, cgroupRoot)
	if err != nil {
		return err
	}
	if applied.PoolSize != wanted.PoolSize {
		cfg.Limits.PoolSize = applied.PoolSize
	}
	return nil
}

// neitherServes is the error of a start where no module can serve.
func neitherServes(configuredErr, recordErr error) error {
	if recordErr == nil {
		return configuredErr
	}
	return fmt.Errorf("%w; the last-known-good cannot stand in for it either: %w", configuredErr, recordErr)
}

// newBareCloud returns a Cloud with no module yet.
func newBareCloud(cfg *Config) *Cloud {
	c := &Cloud{cfg: cfg, events: &moduleEvents{}}
	c.budget = deletion.NewBudget(cfg.Safety.MaxNodeDeletions)
	return c
}

// NewWithBackend returns a Cloud over any backend. Hot reload applies only
// to module backends made by New.
func NewWithBackend(cfg *Config, b Backend) *Cloud {
	c := newBareCloud(cfg)
	c.capabilities = b.Info()
	c.backend.Store(&b)
	return c
}

// startServing puts the first module in service; its capabilities decide
// which controllers run.
func (c *Cloud) startServing(b Backend, file modulefile.File, reason lifecycle.StartReason, record *modulefile.Record) {
	c.capabilities = b.Info()
	c.backend.Store(&b)
	c.serve(file)
	if record != nil {
		c.recorded = record.Digest
	}
	served := "last_known_good"
	if reason.ServesConfigured() {
		served = "configured"
	}
	moduleStarts.WithLabelValues(served, reason.String()).Inc()
	klog.InfoS("provider module loaded", "path", c.cfg.Module.Path, "sha256", file.Digest, "served", served, "reason", reason.String(),
		"capabilities", c.capabilities.Capabilities)
}

// serve notes file as the module in service.
func (c *Cloud) serve(file modulefile.File) {
	c.served, c.servedSince = file, time.Now()
}

// loadRecorded checks and loads the last-known-good module.
func (c *Cloud) loadRecorded(ctx context.Context, record *modulefile.Record) (modulefile.File, Backend, error) {
	file, err := record.File(c.cfg.Module.trust())
	if err == nil {
		var mod Backend
		if mod, err = c.instantiate(ctx, file, false); err == nil {
			return file, mod, nil
		}
	}
	return file, nil, fmt.Errorf("last-known-good module %s from %s: %w", record.Digest, c.lastKnownGood, err)
}

// noteFirstInstall says why nothing guards this start but the deletion
// budget.
func (c *Cloud) noteFirstInstall(recordErr error) {
	switch {
	case recordErr != nil:
		c.warnStart(fmt.Sprintf("module serves without a shadow period: the last-known-good record could not be read: %v", recordErr))
	case c.lastKnownGood != nil:
		klog.InfoS("no last-known-good module recorded yet (first install): the configured module serves, guarded by the deletion budget alone, and is recorded once it has served its rollback window",
			"record", c.lastKnownGood)
	}
}

// warnStart reports a start that did not go as configured.
func (c *Cloud) warnStart(msg string) {
	klog.ErrorS(nil, msg, "record", c.lastKnownGood)
	c.events.emit(events.ModuleStart, msg)
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

// Initialize starts the Events about the module (on the CCM's Pod) and
// deferred Node deletions (on the Node and the Pod), and the reload
// goroutine when hot reload or the last-known-good record is on: it
// advances a rollout begun at start and records the module in service.
// Modules themselves get no client: they reach their cloud, not the
// cluster.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.events.start(clientBuilder)
	if c.served.Digest == "" {
		return
	}
	if c.cfg.Module.ReloadInterval.Duration > 0 || c.lastKnownGood != nil {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-stop; cancel() }()
		go c.watch(ctx)
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
