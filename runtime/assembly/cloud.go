// Package assembly assembles the modules of the cloud-config into the
// CCM's cloudprovider.Interface, for one module or several, so that
// nothing outside it asks which. Each module is a runtime/provider Cloud
// of its own, with its own instances, memory and rate budgets, shared
// state, credentials, rollout, last-known-good record, deletion budget and
// orphan sweep. With several, this package routes each Node and each
// Service to exactly one of them (routing.go) by the cloud-config's rules
// (runtime/cloudconfig's File), and refuses a module's answer about a
// Node it does not serve. The one module of a cloud-config that is a
// single module's (cloudconfig.File.Sole) serves everything, unrouted.
//
// Nodes are served by upstream's Node controllers, one cloud-node and one
// cloud-node-lifecycle controller per module, each over a view of the
// module's own Nodes (NodeServers), so that a module whose cloud hangs
// delays its own Nodes only.
//
// Services are routed by spec.loadBalancerClass. The upstream service
// controller serves Services without a class only, so the CCM runs one
// upstream service controller per module (LoadBalancerServers), each over
// a Service informer that shows it its own Services without their class
// (Routing.ServiceView).
package assembly

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/internal/reportgate"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// Served is one module of a Cloud.
type Served struct {
	// Name is the module's; "" for the one module of a sole cloud-config.
	Name  string
	Cloud *provider.Cloud
	// ServesNodes: the module has a provider ID prefix, or is sole.
	ServesNodes bool
	// ServesLoadBalancers: the module has classes, is the default, or is
	// sole.
	ServesLoadBalancers bool
	// Keeps is the module's orphan sweep's sweep.Scope.Keeps: nil when
	// any Service keeps the load balancer made for it.
	Keeps func(*v1.Service) bool
}

// Cloud is the CCM's cloudprovider.Interface over its modules. Node calls
// go to the module that serves the Node, from Node controllers of its own
// (NodeServers); load balancers are served per module by the service
// controllers the CCM runs for each (LoadBalancerServers); routes by the
// one module the cloud-config names.
type Cloud struct {
	// sole: the cloud-config is one module's, which serves everything;
	// routing is then nil.
	sole    bool
	routing *Routing
	// routes names the routes module of several; "" when none.
	routes string

	// mu guards modules' Cloud, nil until the module started (start.go),
	// and what a module started late is given (initialized, informers).
	mu      sync.Mutex
	modules []Served
	// initialized is set by Initialize, with its arguments.
	initialized   bool
	clientBuilder cloudprovider.ControllerClientBuilder
	stop          <-chan struct{}
	informers     informers.SharedInformerFactory
	// startFailed holds why each module not started yet failed.
	startFailed map[string]error
	// onStart are EachStarted's functions.
	onStart []func(Served)
	// cancel stops the retried starts.
	cancel context.CancelFunc

	// stalls pauses a module whose Node calls stall (stall.go).
	stalls map[string]*stallGuard

	recorder record.EventRecorder
	// pod receives the Events about modules; nil when not known.
	pod *v1.ObjectReference
	// notRouted keeps a Node without a module from flooding its Events.
	notRouted *reportgate.Gate
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
	_ cloudprovider.InstancesV2  = instancesV2{}
	_ cloudprovider.Interface    = nodeCloud{}
)

// notRoutedEvery is how often a Node that no module serves is reported.
const notRoutedEvery = 10 * time.Minute

// Open starts the CCM's cloud from the cloud-config at path. The file is
// read again only to follow a changed module.image.
func Open(ctx context.Context, path string, kube *rest.Config) (*Cloud, error) {
	file, err := cloudconfig.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Start(ctx, file, kube, func() (*cloudconfig.File, error) { return cloudconfig.ReadFile(path) })
}

// Start starts every module of cfg. A module that cannot start stops only
// its own work: its Nodes and Services wait, with an Event and a metric,
// while its start is tried again (start.go), and the other modules serve.
// When no module can start, Start fails with the reasons, as the one
// module of a CCM does. reread, when set, returns the cloud-config as it
// is now, for modules that follow a changed module.image.
func Start(ctx context.Context, cfg *cloudconfig.File, kube *rest.Config, reread func() (*cloudconfig.File, error)) (*Cloud, error) {
	c := &Cloud{sole: cfg.Sole(), routes: cfg.Routes, stalls: map[string]*stallGuard{},
		notRouted: reportgate.New(notRoutedEvery), startFailed: map[string]error{}}
	if !c.sole {
		c.routing = NewRouting(cfg)
	}
	worst := make([]int, len(cfg.Modules))
	total := 0
	for i, m := range cfg.Modules {
		worst[i] = worstCaseMiB(m, kube != nil)
		total += worst[i]
		served := Served{Name: m.Name, ServesNodes: c.sole || m.Nodes.Serves(), ServesLoadBalancers: c.sole || m.LoadBalancers.Serves()}
		if !c.sole {
			served.Keeps = c.routing.Keeps(m.Name)
		}
		c.modules = append(c.modules, served)
		c.stalls[m.Name] = &stallGuard{module: m.Name, now: time.Now}
	}
	starts := make([]func() error, len(cfg.Modules))
	var errs []error
	for i := range cfg.Modules {
		m := &cfg.Modules[i]
		opts := provider.Options{Name: m.Name, Kube: kube, OtherModulesMiB: total - worst[i], Owns: c.owns(m.Name)}
		if reread != nil {
			name := m.Name
			opts.Reread = func() (*cloudconfig.Config, error) {
				now, err := reread()
				if err != nil {
					return nil, err
				}
				if m := now.Entry(name); m != nil {
					return &m.Config, nil
				}
				return nil, fmt.Errorf("module %s is no longer in the cloud-config", name)
			}
		}
		routes := !c.sole && cfg.Routes == m.Name
		starts[i] = func() error { return c.startModule(ctx, i, *m, opts, routes) }
		if err := starts[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(cfg.Modules) {
		return nil, errors.Join(errs...)
	}
	retryCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for i, m := range cfg.Modules {
		if c.module(m.Name) == nil {
			go c.retryStart(retryCtx, m.Name, starts[i])
		}
	}
	return c, nil
}

// worstCaseMiB is what module m may cost at most (runtime/membudget):
// what the other modules' budgets count for it.
func worstCaseMiB(m cloudconfig.Entry, kube bool) int {
	return provider.MemoryBudget(&m.Config, m.RollsOut(kube)).ModuleMiB()
}

// capable refuses a module whose exports cannot serve what the
// cloud-config routes to it. A sole module serves what it exports, as
// upstream's controllers use a provider.
func capable(cloud *provider.Cloud, m cloudconfig.Entry, routes bool) error {
	var errs []error
	if _, ok := cloud.InstancesV2(); m.Nodes.Serves() && !ok {
		errs = append(errs, fmt.Errorf("serves Nodes (nodes.providerIDPrefix) but does not export %s: a CCM of several modules routes Nodes with InstancesV2 only", abi.ExportInstanceMetadata))
	}
	if _, ok := cloud.LoadBalancer(); m.LoadBalancers.Serves() && !ok {
		errs = append(errs, errors.New("serves load balancers (loadBalancers) but does not export the LoadBalancer interface"))
	}
	if _, ok := cloud.Routes(); routes && !ok {
		errs = append(errs, errors.New("is the routes module but does not export the Routes interface"))
	}
	return errors.Join(errs...)
}

// owns is module's Node filter (provider.Options.Owns); nil, every Node,
// for a sole module.
func (c *Cloud) owns(module string) func(*v1.Node) bool {
	if c.sole {
		return nil
	}
	return func(n *v1.Node) bool {
		m, _ := c.routing.NodeModule(n)
		return m == module
	}
}

// Modules lists the modules started so far, in the cloud-config's order.
func (c *Cloud) Modules() []Served {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Served
	for _, m := range c.modules {
		if m.Cloud != nil {
			out = append(out, m)
		}
	}
	return out
}

// module returns the module named name, nil until it started.
func (c *Cloud) module(name string) *provider.Cloud {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.modules {
		if m.Name == name {
			return m.Cloud
		}
	}
	return nil
}

// Initialize starts each module's Events and reload, and the Events about
// Nodes no module serves and modules that did not start. A module started
// later is initialized as it starts.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	var recorder record.EventRecorder
	if clientBuilder != nil {
		if client, err := clientBuilder.Client("wasm-cloud-provider"); err != nil {
			klog.ErrorS(err, "events about unrouted Nodes and modules not started disabled")
		} else {
			recorder = events.NewRecorder(client)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initialized, c.clientBuilder, c.stop, c.recorder = true, clientBuilder, stop, recorder
	if namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"); namespace != "" && name != "" {
		c.pod = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name}
	}
	for _, m := range c.modules {
		if m.Cloud != nil {
			m.Cloud.Initialize(clientBuilder, stop)
		} else {
			c.reportStartFailedLocked(m.Name, c.startFailed[m.Name])
		}
	}
}

// SetInformers gives every module the Node cache, and reports the Nodes
// no module serves from it. A module started later gets it as it starts.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	c.mu.Lock()
	c.informers = factory
	for _, m := range c.modules {
		if m.Cloud != nil {
			m.Cloud.SetInformers(factory)
		}
	}
	c.mu.Unlock()
	if !c.sole {
		c.reportUnrouted(factory.Core().V1().Nodes().Informer())
	}
}

// Close stops the retried starts and releases every module.
func (c *Cloud) Close(ctx context.Context) error {
	if c.cancel != nil {
		c.cancel()
	}
	var errs []error
	for _, m := range c.Modules() {
		errs = append(errs, m.Cloud.Close(ctx))
	}
	return errors.Join(errs...)
}

// ProviderName returns "wasm".
func (c *Cloud) ProviderName() string { return provider.ProviderName }

// HasClusterID reports true, as each module's provider does.
func (c *Cloud) HasClusterID() bool { return true }

// soleModule is the one module of a sole cloud-config. Start fails
// unless it started, and it is never started again, so it is read without
// the lock: the controllers ask for its interfaces on every sync.
func (c *Cloud) soleModule() *provider.Cloud { return c.modules[0].Cloud }

// InstancesV2 routes each Node to its module; a sole module's are its own.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if c.sole {
		return c.soleModule().InstancesV2()
	}
	return instancesV2{Cloud: c}, true
}

// Instances are a sole module's. Several modules' Nodes are routed with
// InstancesV2, which passes the whole Node, labels included.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) {
	if c.sole {
		return c.soleModule().Instances()
	}
	return nil, false
}

// LoadBalancer is not offered to the upstream service controller: each
// module's load balancers are served by a service controller of its own
// (LoadBalancers).
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Routes are the routes module's, when the cloud-config names one, or
// the sole module's.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if c.sole {
		return c.soleModule().Routes()
	}
	if m := c.module(c.routes); c.routes != "" && m != nil {
		return m.Routes()
	}
	return nil, false
}

// Zones are a sole module's. Several modules answer zones per Node, in
// InstancesV2.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) {
	if c.sole {
		return c.soleModule().Zones()
	}
	return nil, false
}

// Clusters are a sole module's; several modules' are not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) {
	if c.sole {
		return c.soleModule().Clusters()
	}
	return nil, false
}

// LoadBalancerServer is what one upstream service controller runs over:
// a module's provider and the view of Services it is shown.
type LoadBalancerServer struct {
	// Module names the module; "" for a sole module.
	Module string
	// Cloud is the provider whose LoadBalancer the controller calls.
	Cloud cloudprovider.Interface
	// View is the transform (cache.TransformFunc) of the controller's
	// Service informer (Routing.ServiceView); nil: every Service as it
	// is, from the CCM's shared informer.
	View func(any) (any, error)
}

// LoadBalancerServers returns, for each module that serves load
// balancers, what its service controller runs over: the module's load
// balancer, given the Nodes LoadBalancerRule.Targets says. A sole
// module's is its own, over every Service, as upstream runs a provider.
func (c *Cloud) LoadBalancerServers() []LoadBalancerServer {
	if c.sole {
		if lb, ok := c.soleModule().LoadBalancer(); ok {
			return []LoadBalancerServer{{Cloud: lbCloud{Interface: c, lb: lb}}}
		}
		return nil
	}
	var out []LoadBalancerServer
	for i := range c.modules {
		m := &c.modules[i] // Name and ServesLoadBalancers only: Cloud is c.mu's
		if !m.ServesLoadBalancers {
			continue
		}
		var lb cloudprovider.LoadBalancer = moduleLB{c: c, name: m.Name}
		if !c.routing.TargetsAll(m.Name) {
			lb = ownTargets{LoadBalancer: lb, owns: c.owns(m.Name)}
		}
		if c.routing.lbDefault == m.Name {
			lb = lostClass{LoadBalancer: lb, c: c, self: m.Name}
		}
		out = append(out, LoadBalancerServer{Module: m.Name, Cloud: lbCloud{Interface: c, lb: lb}, View: c.routing.ServiceView(m.Name)})
	}
	return out
}

// lbCloud is a module's provider with the load balancer its service
// controller uses.
type lbCloud struct {
	cloudprovider.Interface
	lb cloudprovider.LoadBalancer
}

func (l lbCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return l.lb, true }

// ownTargets gives a module's load balancers its own Nodes only: another
// cloud's machines are not targets it can reach.
type ownTargets struct {
	cloudprovider.LoadBalancer
	owns func(*v1.Node) bool
}

func (o ownTargets) filter(nodes []*v1.Node) []*v1.Node {
	var own []*v1.Node
	for _, n := range nodes {
		if o.owns(n) {
			own = append(own, n)
		}
	}
	return own
}

func (o ownTargets) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return o.LoadBalancer.EnsureLoadBalancer(ctx, clusterName, svc, o.filter(nodes))
}

func (o ownTargets) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	return o.LoadBalancer.UpdateLoadBalancer(ctx, clusterName, svc, o.filter(nodes))
}

// lostClass is the default module's load balancer. Its service
// controller is the one given a Service whose class was lost
// (Routing.ClassLost): one switched away from type LoadBalancer while no
// CCM ran, whose load balancer may be another module's. Cleaning up after
// such a Service, it has every other module that lists a load balancer
// made for the Service's UID delete its own, so that the Service keeps its
// finalizer until the load balancer is gone and the upstream
// controller's DeletedLoadBalancer tells the truth. A module that cannot
// say is left to its own orphan sweep.
type lostClass struct {
	cloudprovider.LoadBalancer
	c    *Cloud
	self string
}

func (l lostClass) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	status, exists, err := l.LoadBalancer.GetLoadBalancer(ctx, clusterName, svc)
	if err != nil || exists || !l.c.routing.ClassLost(svc) {
		return status, exists, err
	}
	if holders := l.c.holders(ctx, clusterName, svc, l.self); len(holders) > 0 {
		return &v1.LoadBalancerStatus{}, true, nil
	}
	return status, false, nil
}

func (l lostClass) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	if l.c.routing.ClassLost(svc) {
		for _, m := range l.c.holders(ctx, clusterName, svc, l.self) {
			lb, _ := m.Cloud.LoadBalancer() // holders serve load balancers
			if err := lb.EnsureLoadBalancerDeleted(ctx, clusterName, svc); err != nil {
				return fmt.Errorf("module %s, which made the load balancer of this Service: %w", m.Name, err)
			}
			klog.InfoS("deleted the load balancer of a Service whose class was cleared while no CCM ran", "module", m.Name,
				"service", klog.KObj(svc), "serviceUID", svc.UID)
		}
	}
	return l.LoadBalancer.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

// holders are the modules other than self that list a load balancer made
// for svc in clusterName. They are asked side by side, each for at most
// holdersWait, so that a module whose cloud hangs delays the default
// module's cleanup by that much only. A module whose listing fails, takes
// longer or does not exist is not one: its orphan sweep, which sees the
// Service no longer wants its load balancer, deletes it.
func (c *Cloud) holders(ctx context.Context, clusterName string, svc *v1.Service, self string) []Served {
	ctx, cancel := context.WithTimeout(ctx, holdersWait)
	defer cancel()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out []Served
	)
	for _, m := range c.Modules() {
		if m.Name == self || !m.ServesLoadBalancers {
			continue
		}
		wg.Go(func() {
			listed, _, err := m.Cloud.ListOwnedLoadBalancers(ctx, clusterName)
			if err != nil {
				klog.InfoS("a Service whose class was cleared may hold a load balancer of this module, which did not list its load balancers; its orphan sweep deletes it",
					"module", m.Name, "service", klog.KObj(svc), "err", err)
				return
			}
			for _, lb := range listed {
				if lb.ServiceUID == string(svc.UID) && (lb.ClusterName == "" || lb.ClusterName == clusterName) {
					mu.Lock()
					out = append(out, m)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

// holdersWait bounds the listings of holders.
const holdersWait = 5 * time.Second

// errNotRouted is the answer about a Node no module serves: an error, so
// that no controller deletes, taints or initializes it.
var errNotRouted = errors.New("no module serves this Node")

// moduleFor returns the InstancesV2 of node's module, guarded against its
// stalls.
func (i instancesV2) moduleFor(node *v1.Node) (string, cloudprovider.InstancesV2, error) {
	c := i.Cloud
	name, why := c.routing.NodeModule(node)
	switch {
	case name == "":
		c.reportNode(node, events.NodeNotRouted, "No module serves this Node: "+why)
		return "", nil, fmt.Errorf("node %s: %w: %s", node.Name, errNotRouted, why)
	case i.module != "" && name != i.module:
		// Its labels or provider ID changed since the module's view
		// showed it; its own module's controllers will see it.
		return "", nil, fmt.Errorf("node %s is served by module %s, not %s", node.Name, name, i.module)
	}
	m := c.module(name)
	if m == nil {
		return "", nil, fmt.Errorf("node %s: %w", node.Name, c.notStarted(name))
	}
	guard := c.stalls[name]
	if err := guard.admit(); err != nil {
		return "", nil, err
	}
	instances, _ := m.InstancesV2() // checked at start
	return name, guardedInstances{instances, guard}, nil
}

// guardedInstances counts each call's outcome in its module's stallGuard.
type guardedInstances struct {
	cloudprovider.InstancesV2
	guard *stallGuard
}

func (g guardedInstances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	exists, err := g.InstancesV2.InstanceExists(ctx, node)
	g.guard.record(err)
	return exists, err
}

func (g guardedInstances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	shutdown, err := g.InstancesV2.InstanceShutdown(ctx, node)
	g.guard.record(err)
	return shutdown, err
}

func (g guardedInstances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	meta, err := g.InstancesV2.InstanceMetadata(ctx, node)
	g.guard.record(err)
	return meta, err
}

func (c *Cloud) reportNode(node *v1.Node, reason events.Reason, message string) {
	if !c.notRouted.Admit(node.Name+"/"+reason.String(), time.Now()) {
		klog.V(4).InfoS(message, "node", node.Name, "reason", reason.String())
		return
	}
	klog.InfoS(message, "node", node.Name, "reason", reason.String())
	c.mu.Lock()
	recorder := c.recorder
	c.mu.Unlock()
	if recorder != nil {
		events.Record(recorder, &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}, reason, message)
	}
}

// instancesV2 routes each Node to its module; with module set, to that
// module only, for the Node controllers of that module (NodeServers).
type instancesV2 struct {
	*Cloud
	module string
}

func (i instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, m, err := i.moduleFor(node)
	if err != nil {
		return false, err
	}
	return m.InstanceExists(ctx, node)
}

func (i instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	_, m, err := i.moduleFor(node)
	if err != nil {
		return false, err
	}
	return m.InstanceShutdown(ctx, node)
}

// InstanceMetadata refuses a provider ID outside the module's prefix: it
// would move the Node to another module, or to none.
func (i instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	name, m, err := i.moduleFor(node)
	if err != nil {
		return nil, err
	}
	meta, err := m.InstanceMetadata(ctx, node)
	if err != nil {
		return nil, err
	}
	if !i.routing.OwnsProviderID(name, meta.ProviderID) {
		msg := fmt.Sprintf("module %s answered provider ID %q, outside its nodes.providerIDPrefix; the answer is not used", name, meta.ProviderID)
		i.reportNode(node, events.ModuleAnswerRefused, msg)
		return nil, errors.New(msg)
	}
	return meta, nil
}
