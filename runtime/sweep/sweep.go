// Package sweep deletes the load balancers a provider module made for
// Services that no longer exist: the orphan load balancer sweep.
//
// Why it exists. The service controller reconciles the cluster into the
// cloud, never the cloud against the cluster. A leader killed while it
// creates a load balancer, with the Service deleted right after, leaves
// the next leader seeing no load balancer: it removes the Service's
// finalizer, and the late create lands in the cloud, where nothing will
// ever delete it (kubernetes/kubernetes#53451, open since 2017). Every
// cloud's CCM inherits this; the host fixes it once for every module that
// can list what it made (ABI revision 3, abi.ExportListLoadBalancers).
//
// How. Every period the leader asks the module in service for the load
// balancers it made for this cluster, each with the UID of the Service it
// was made for, and compares them with the Services in the shared
// informer. A load balancer is deleted, through the module's own
// EnsureLoadBalancerDeleted, only when every guard below holds:
//
//   - the Service informer has synced, so a missing UID means a missing
//     Service and not a cache still filling;
//   - no Service in the cluster has its UID, whatever the Service's type
//     or state (one being deleted is the service controller's to clean);
//     or, for a module of several (Scope.Keeps), the Service with its UID
//     no longer wants a load balancer from this module: it is not of type
//     LoadBalancer, or of a class another module serves, and does not
//     hold the cleanup finalizer for this module's service controller.
//     The module's listing says which Service a load balancer was made
//     for, so this holds after a restart too, when no process remembers
//     the class the API server cleared;
//   - no Service in the cluster resolves to it: the module's
//     GetLoadBalancerName for every Service that has or may get a load
//     balancer differs from its name. A Service deleted and recreated
//     under the same name gets a new UID, and a module that names load
//     balancers by annotation (hcloud's load-balancer.hetzner.cloud/name)
//     or by namespace and name adopts the old load balancer for the new
//     Service; the listing still carries the old UID until the adoption
//     relabels it, and only this check keeps the sweep from deleting a
//     load balancer that serves, or is about to serve, a live Service. If
//     any name cannot be had, nothing is deleted in that sweep;
//   - two consecutive sweeps, listed by the same module (not a module
//     replaced in between), found it orphaned: one listing is never
//     enough to delete;
//   - the entry names this cluster, when the module says which cluster
//     it is for: the module is asked for this cluster's only, and an
//     entry that says otherwise is ignored and counted;
//   - the sweep's own deletion budget (MaxDeletionsPerHour, a sliding
//     hour) admits it; what it does not admit waits for a later sweep.
//
// The sweep does not run when the cluster name is the upstream default
// "kubernetes" unless the operator says it is unique
// (AllowDefaultClusterName): the cluster name is what separates two
// clusters' load balancers in one cloud account, and two clusters left
// at the default would each take the other's load balancers for orphans.
//
// It runs as a controller of the cloud-controller-manager, so only on the
// leader, and only when the module exports the listing: a module without
// it (revision 2 or older) is never asked.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
)

// Scope is what the sweep of one module of several (runtime/assembly)
// knows of the others; the zero Scope is a CCM of one module.
type Scope struct {
	// Module names the module in the sweep's Events.
	Module string
	// Keeps reports whether svc still wants this module's load balancer,
	// or holds the cleanup finalizer for this module's service controller.
	// nil: any Service keeps the load balancer made for it.
	Keeps func(svc *v1.Service) bool
}

// ErrUnsupported is what Cloud.ListOwnedLoadBalancers answers when the
// module in service does not export the listing.
var ErrUnsupported = errors.New("the module in service does not list its load balancers (ABI revision 3 export " + abi.ExportListLoadBalancers + ")")

// Cloud is what the sweep needs of the provider (runtime/provider.Cloud).
type Cloud interface {
	// Name labels the sweep's metrics.
	Name() string
	// ListOwnedLoadBalancers asks the module in service for the load
	// balancers it made for clusterName. module identifies the module
	// that answered (comparable), so that two sweeps are known to have
	// asked the same one. ErrUnsupported when it has no such export.
	ListOwnedLoadBalancers(ctx context.Context, clusterName string) (lbs []abi.OwnedLoadBalancer, module any, err error)
	// LoadBalancerNameOf is the module's GetLoadBalancerName for svc, or
	// an error when the module gave no name.
	LoadBalancerNameOf(ctx context.Context, clusterName string, svc *v1.Service) (string, error)
	// DeleteOwnedLoadBalancer is the module's EnsureLoadBalancerDeleted.
	DeleteOwnedLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) error
}

// Sweeper is the sweep of one cluster. Run drives it; Sweep is one pass.
type Sweeper struct {
	cfg         cloudconfig.OrphanSweep
	cloud       Cloud
	scope       Scope
	clusterName string
	services    corelisters.ServiceLister
	synced      func() bool
	recorder    record.EventRecorder
	// pod receives the Events about load balancers whose Service's
	// namespace is unknown; nil when the CCM's Pod is not known.
	pod *v1.ObjectReference
	now func() time.Time

	mu sync.Mutex
	// module answered the previous listing; pending are the orphans it
	// found, by key.
	module  any
	pending map[string]bool
	// deleted are the load balancers deleted since the previous sweep;
	// stuck those that a delete did not remove, never tried again.
	deleted map[string]bool
	stuck   map[string]bool
	// deletions are the times of the deletions of the last hour.
	deletions []time.Time
	// unsupportedLogged keeps "not listed" to one log line per module.
	unsupportedLogged any
}

// New returns the sweep of clusterName's load balancers. recorder and pod
// may be nil.
func New(cfg cloudconfig.OrphanSweep, cloud Cloud, scope Scope, clusterName string, services corelisters.ServiceLister, synced func() bool,
	recorder record.EventRecorder, pod *v1.ObjectReference) *Sweeper {
	return &Sweeper{cfg: cfg.WithDefaults(), cloud: cloud, scope: scope, clusterName: clusterName, services: services, synced: synced,
		recorder: recorder, pod: pod, now: time.Now,
		pending: map[string]bool{}, deleted: map[string]bool{}, stuck: map[string]bool{}}
}

// Refusal says why the sweep cannot run at all with cfg and clusterName;
// "" when it can.
func Refusal(cfg cloudconfig.OrphanSweep, clusterName string) string {
	switch {
	case cfg.Disabled:
		return "orphanSweep.disabled is set"
	case clusterName == "":
		return "the cluster name is empty"
	case clusterName == cloudconfig.DefaultClusterName && !cfg.AllowDefaultClusterName:
		return `the cluster name is the default "kubernetes", which other clusters in the cloud account may share; set --cluster-name to a name unique in the account, or orphanSweep.allowDefaultClusterName`
	}
	return ""
}

// Run sweeps every period until ctx ends, the first time one period after
// the start: the controllers have then had time to create the load
// balancers of the Services they found.
func (s *Sweeper) Run(ctx context.Context) {
	klog.InfoS("orphan load balancer sweep started", "cluster", s.clusterName, "period", s.cfg.Period.Duration,
		"maxDeletionsPerHour", s.cfg.MaxDeletionsPerHour, "dryRun", s.cfg.DryRun)
	t := time.NewTicker(s.cfg.Period.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(ctx)
		}
	}
}

// key identifies a listed load balancer: its name and the Service UID it
// carries. An adoption that relabels it makes it another entry.
func key(lb *abi.OwnedLoadBalancer) string { return lb.Name + "\x00" + lb.ServiceUID }

// Result of a sweep, for its metric.
const (
	resultOK          = "ok"
	resultNotSynced   = "not_synced"
	resultUnsupported = "unsupported"
	resultListFailed  = "list_failed"
	resultNameFailed  = "name_failed"
)

// Sweep runs one pass and returns its result.
func (s *Sweeper) Sweep(ctx context.Context) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	result := s.sweep(ctx)
	sweeps.WithLabelValues(s.cloud.Name(), result).Inc()
	pendingGauge.WithLabelValues(s.cloud.Name()).Set(float64(len(s.pending)))
	return result
}

func (s *Sweeper) sweep(ctx context.Context) string {
	if !s.synced() {
		klog.V(2).InfoS("orphan sweep skipped: the Service informer has not synced")
		return resultNotSynced
	}
	listed, module, err := s.cloud.ListOwnedLoadBalancers(ctx, s.clusterName)
	if errors.Is(err, ErrUnsupported) || errors.Is(err, cloudprovider.NotImplemented) {
		if s.unsupportedLogged != module || module == nil {
			klog.InfoS("orphan sweep idle: the module in service does not list its load balancers", "reason", err)
			s.unsupportedLogged = module
		}
		s.reset(nil)
		return resultUnsupported
	}
	if err != nil {
		// A failed listing breaks the chain: the next orphan must be seen
		// by two consecutive listings again.
		klog.ErrorS(err, "orphan sweep: listing the module's load balancers failed; nothing deleted")
		s.reset(nil)
		return resultListFailed
	}
	if module != s.module {
		// A new module's listing confirms nothing an old one found.
		s.reset(module)
	}
	lbGauge.WithLabelValues(s.cloud.Name()).Set(float64(len(listed)))

	services, err := s.services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "orphan sweep: listing Services from the informer")
		return resultNotSynced
	}
	byUID := make(map[types.UID]*v1.Service, len(services))
	for _, svc := range services {
		byUID[svc.UID] = svc
	}

	// Orphans by the UID rule, or no longer wanted.
	var orphans []*abi.OwnedLoadBalancer
	why := map[string]string{}
	seen := map[string]bool{}
	for i := range listed {
		lb := &listed[i]
		switch {
		case lb.Name == "" || lb.ServiceUID == "":
			ignored.WithLabelValues(s.cloud.Name(), "incomplete").Inc()
			klog.InfoS("orphan sweep: the module listed a load balancer without a name or Service UID; ignored", "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID)
			continue
		case lb.ClusterName != "" && lb.ClusterName != s.clusterName:
			ignored.WithLabelValues(s.cloud.Name(), "other_cluster").Inc()
			klog.InfoS("orphan sweep: the module listed another cluster's load balancer; ignored", "name", lb.Name, "id", lb.ID, "itsCluster", lb.ClusterName, "cluster", s.clusterName)
			continue
		}
		k := key(lb)
		if svc := byUID[types.UID(lb.ServiceUID)]; svc == nil {
			why[k] = "made for Service UID " + lb.ServiceUID + ", which no longer exists"
		} else if s.scope.Keeps == nil || s.scope.Keeps(svc) {
			continue
		} else {
			why[k] = fmt.Sprintf("made for Service %s/%s (UID %s), which no longer wants a load balancer from this module", svc.Namespace, svc.Name, lb.ServiceUID)
		}
		seen[k] = true
		if s.stuck[k] {
			continue
		}
		if s.deleted[k] {
			// Deleted last time and listed again: the module's delete did
			// not find it. Trying again would delete nothing either.
			s.stuck[k] = true
			deletions.WithLabelValues(s.cloud.Name(), "not_removed").Inc()
			s.event(lb, events.OrphanLoadBalancerNotRemoved, fmt.Sprintf("load balancer %s, %s, is still listed after the module's EnsureLoadBalancerDeleted succeeded; the sweep will not try it again until the CCM restarts", describe(lb), why[k]))
			continue
		}
		orphans = append(orphans, lb)
	}
	s.deleted = map[string]bool{}
	for k := range s.pending {
		if !seen[k] {
			delete(s.pending, k)
		}
	}
	if len(orphans) == 0 {
		return resultOK
	}

	// The name rule: no Service may resolve to an orphan's name.
	serving, err := s.namesInUse(ctx, services)
	if err != nil {
		klog.ErrorS(err, "orphan sweep: the module gave no load balancer name for a Service; nothing deleted in this sweep")
		return resultNameFailed
	}

	for _, lb := range orphans {
		k := key(lb)
		if svc, ok := serving[lb.Name]; ok {
			delete(s.pending, k)
			deletions.WithLabelValues(s.cloud.Name(), "spared").Inc()
			klog.InfoS("orphan sweep: load balancer made for a deleted Service now serves another one; kept", "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID, "service", svc)
			continue
		}
		if !s.pending[k] {
			s.pending[k] = true
			klog.InfoS("orphan sweep: load balancer no Service wants; deleted at the next sweep if still orphaned", "module", s.cloud.Name(), "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID, "service", lb.ServiceNamespace+"/"+lb.ServiceName, "why", why[k])
			s.event(lb, events.OrphanLoadBalancerFound, fmt.Sprintf("load balancer %s was %s; it is deleted at the next sweep unless a Service claims it", describe(lb), why[k]))
			continue
		}
		s.remove(ctx, lb, why[k])
	}
	return resultOK
}

// namesInUse maps the load balancer name of every Service that has or may
// get one of this module (type LoadBalancer, or still holding the cleanup
// finalizer; of this module's, by Scope.Keeps) to the Service.
func (s *Sweeper) namesInUse(ctx context.Context, services []*v1.Service) (map[string]string, error) {
	names := map[string]string{}
	for _, svc := range services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer && !hasFinalizer(svc, loadBalancerCleanupFinalizer) {
			continue
		}
		if s.scope.Keeps != nil && !s.scope.Keeps(svc) {
			continue
		}
		name, err := s.cloud.LoadBalancerNameOf(ctx, s.clusterName, svc)
		if err != nil {
			return nil, fmt.Errorf("the load balancer name of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		names[name] = svc.Namespace + "/" + svc.Name
	}
	return names, nil
}

// loadBalancerCleanupFinalizer is the service controller's finalizer
// (k8s.io/cloud-provider/service/helpers.LoadBalancerCleanupFinalizer).
const loadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

func hasFinalizer(svc *v1.Service, name string) bool {
	for _, f := range svc.Finalizers {
		if f == name {
			return true
		}
	}
	return false
}

// remove deletes a confirmed orphan, within the budget.
func (s *Sweeper) remove(ctx context.Context, lb *abi.OwnedLoadBalancer, why string) {
	k := key(lb)
	if s.cfg.DryRun {
		deletions.WithLabelValues(s.cloud.Name(), "dry_run").Inc()
		klog.InfoS("orphan sweep (dry run): would delete load balancer", "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID)
		return
	}
	now := s.now()
	kept := s.deletions[:0]
	for _, t := range s.deletions {
		if now.Sub(t) < time.Hour {
			kept = append(kept, t)
		}
	}
	s.deletions = kept
	if len(s.deletions) >= s.cfg.MaxDeletionsPerHour {
		deletions.WithLabelValues(s.cloud.Name(), "deferred").Inc()
		s.event(lb, events.OrphanLoadBalancerDeferred, fmt.Sprintf("orphaned load balancer %s not deleted yet: the sweep deleted %d in the last hour (orphanSweep.maxDeletionsPerHour)", describe(lb), len(s.deletions)))
		return
	}
	s.deletions = append(s.deletions, now)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: lb.ServiceNamespace, Name: lb.ServiceName, UID: types.UID(lb.ServiceUID)},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	if svc.Name == "" {
		svc.Name = lb.Name
	}
	if err := s.cloud.DeleteOwnedLoadBalancer(ctx, s.clusterName, svc); err != nil {
		deletions.WithLabelValues(s.cloud.Name(), "failed").Inc()
		klog.ErrorS(err, "orphan sweep: deleting load balancer failed; tried again at the next sweep", "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID)
		s.event(lb, events.OrphanLoadBalancerDeleteFailed, fmt.Sprintf("deleting orphaned load balancer %s failed: %v", describe(lb), err))
		return
	}
	delete(s.pending, k)
	s.deleted[k] = true
	deletions.WithLabelValues(s.cloud.Name(), "deleted").Inc()
	klog.InfoS("orphan sweep: deleted load balancer no Service wants", "module", s.cloud.Name(), "name", lb.Name, "id", lb.ID, "serviceUID", lb.ServiceUID, "service", lb.ServiceNamespace+"/"+lb.ServiceName, "why", why)
	s.event(lb, events.OrphanLoadBalancerDeleted, fmt.Sprintf("deleted load balancer %s: it was %s, and two consecutive sweeps found it orphaned", describe(lb), why))
}

// reset forgets the pending orphans; module is the module now answering.
func (s *Sweeper) reset(module any) {
	s.module = module
	s.pending = map[string]bool{}
	s.deleted = map[string]bool{}
}

func describe(lb *abi.OwnedLoadBalancer) string {
	d := fmt.Sprintf("%q", lb.Name)
	if lb.ID != "" {
		d += " (" + lb.ID + ")"
	}
	if lb.ServiceName != "" {
		d += " of Service " + lb.ServiceNamespace + "/" + lb.ServiceName
	}
	return d
}

// event records an Event on the deleted Service (its namespace shows it)
// when the listing named it, else on the CCM's Pod when known.
func (s *Sweeper) event(lb *abi.OwnedLoadBalancer, reason events.Reason, msg string) {
	if s.recorder == nil {
		return
	}
	ref := s.pod
	if lb.ServiceNamespace != "" && lb.ServiceName != "" {
		ref = &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: lb.ServiceNamespace, Name: lb.ServiceName, UID: types.UID(lb.ServiceUID)}
	}
	if s.scope.Module != "" {
		msg = "module " + s.scope.Module + ": " + msg
	}
	if ref != nil {
		events.Record(s.recorder, ref, reason, msg)
	}
}

// Pending returns the keys of the orphans found once, sorted (tests).
func (s *Sweeper) Pending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pending))
	for k := range s.pending {
		out = append(out, strings.ReplaceAll(k, "\x00", "/"))
	}
	sort.Strings(out)
	return out
}
