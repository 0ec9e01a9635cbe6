package assembly

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// A module that cannot start (its file is missing or refused, and it has
// no last-known-good) would otherwise stop the whole CCM, and with it the
// modules that can serve. Its start is tried again after retryFirst, the
// wait doubling up to retryMax: a fixed module file or a restored cloud
// is picked up without a restart.
var (
	retryFirst = 10 * time.Second
	retryMax   = 5 * time.Minute
)

var moduleStarted = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace: "wasmccm", Subsystem: "multimodule", Name: "module_started",
	Help:           "1 when the module of a CCM of several has started, 0 while its start fails and is tried again; its Nodes and Services wait meanwhile.",
	StabilityLevel: metrics.ALPHA,
}, []string{"module"})

func init() { legacyregistry.MustRegister(moduleStarted) }

// startModule starts the module at index i of the cloud-config, and gives
// it what Initialize and SetInformers gave the others.
func (c *Cloud) startModule(ctx context.Context, i int, m cloudconfig.Entry, opts provider.Options, routes bool) error {
	cloud, err := provider.Start(ctx, &m.Config, opts)
	if err == nil {
		err = capable(cloud, m, routes)
	}
	if err != nil {
		if cloud != nil {
			cloud.Close(ctx)
		}
		err = fmt.Errorf("module %s: %w", m.Name, err)
		moduleStarted.WithLabelValues(m.Name).Set(0)
		c.mu.Lock()
		c.startFailed[m.Name] = err
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	c.modules[i].Cloud = cloud
	served := c.modules[i]
	delete(c.startFailed, m.Name)
	if c.initialized {
		cloud.Initialize(c.clientBuilder, c.stop)
	}
	if c.informers != nil {
		cloud.SetInformers(c.informers)
	}
	onStart := slices.Clone(c.onStart)
	c.mu.Unlock()
	moduleStarted.WithLabelValues(m.Name).Set(1)
	klog.InfoS("module started", "module", m.Name, "providerIDPrefix", m.Nodes.ProviderIDPrefix,
		"loadBalancerClasses", m.LoadBalancers.Classes, "defaultLoadBalancer", m.LoadBalancers.Default)
	for _, f := range onStart {
		f(served)
	}
	return nil
}

// EachStarted calls f with every module started so far, and later with
// each module as it starts: what runs once per module (its orphan sweep)
// reaches a module started late too.
func (c *Cloud) EachStarted(f func(Served)) {
	c.mu.Lock()
	c.onStart = append(c.onStart, f)
	var started []Served
	for _, m := range c.modules {
		if m.Cloud != nil {
			started = append(started, m)
		}
	}
	c.mu.Unlock()
	for _, m := range started {
		f(m)
	}
}

// retryStart tries start again until it succeeds or ctx ends.
func (c *Cloud) retryStart(ctx context.Context, name string, start func() error) {
	for wait := retryFirst; ; wait = min(2*wait, retryMax) {
		c.mu.Lock()
		c.reportStartFailedLocked(name, c.startFailed[name])
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if start() == nil {
			return
		}
	}
}

// reportStartFailedLocked logs why module name did not start, and records
// it as an Event on the CCM's Pod once Initialize gave a recorder.
func (c *Cloud) reportStartFailedLocked(name string, err error) {
	if err == nil {
		return
	}
	msg := fmt.Sprintf("module %s: could not start; its Nodes and Services wait, and its start is tried again: %v", name, err)
	klog.ErrorS(err, "module could not start; its Nodes and Services wait, and its start is tried again", "module", name)
	if c.recorder != nil && c.pod != nil {
		events.Record(c.recorder, c.pod, events.ModuleStartFailed, msg)
	}
}

// notStarted is the error of a call for a module that has not started.
func (c *Cloud) notStarted(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startFailed[name]; err != nil {
		return fmt.Errorf("%w: %w", errNotStarted, err)
	}
	return fmt.Errorf("%w: module %s", errNotStarted, name)
}

// errNotStarted is the answer about a Node or Service of a module that
// has not started: an error, so that nothing is deleted or given up.
var errNotStarted = errors.New("its module has not started")

// moduleLB is the load balancer of module name, which its service
// controller keeps from the start: the module's own once it started, an
// error until then, which the controller retries.
type moduleLB struct {
	c    *Cloud
	name string
}

func (l moduleLB) lb() (cloudprovider.LoadBalancer, error) {
	m := l.c.module(l.name)
	if m == nil {
		return nil, l.c.notStarted(l.name)
	}
	lb, _ := m.LoadBalancer() // checked at start
	return lb, nil
}

func (l moduleLB) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lb, err := l.lb()
	if err != nil {
		return nil, false, err
	}
	return lb.GetLoadBalancer(ctx, clusterName, svc)
}

func (l moduleLB) GetLoadBalancerName(ctx context.Context, clusterName string, svc *v1.Service) string {
	lb, err := l.lb()
	if err != nil {
		return cloudprovider.DefaultLoadBalancerName(svc)
	}
	return lb.GetLoadBalancerName(ctx, clusterName, svc)
}

func (l moduleLB) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	lb, err := l.lb()
	if err != nil {
		return nil, err
	}
	return lb.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
}

func (l moduleLB) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	lb, err := l.lb()
	if err != nil {
		return err
	}
	return lb.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

func (l moduleLB) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	lb, err := l.lb()
	if err != nil {
		return err
	}
	return lb.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}
