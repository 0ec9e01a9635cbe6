// Package events names every Event the CCM records: each reason is a
// constant of type Normal or Warning, so that the Event's type goes with
// its reason, and docs/reference/events.md is generated from this file
// (the doc comment of each constant says when it is recorded).
package events

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Reason is the reason of an Event, which fixes its type.
type Reason interface {
	// Type is v1.EventTypeNormal or v1.EventTypeWarning.
	Type() string
	String() string
}

// Normal is the reason of an Event of type Normal: the CCM did what it is
// configured to do.
type Normal string

// Type is v1.EventTypeNormal.
func (Normal) Type() string     { return v1.EventTypeNormal }
func (r Normal) String() string { return string(r) }

// Warning is the reason of an Event of type Warning: something an operator
// should look at.
type Warning string

// Type is v1.EventTypeWarning.
func (Warning) Type() string     { return v1.EventTypeWarning }
func (r Warning) String() string { return string(r) }

// NewRecorder returns a recorder of the CCM's Events, sent through client.
func NewRecorder(client kubernetes.Interface) record.EventRecorder {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "wasm-cloud-controller-manager"})
}

// Record records an Event of reason on object.
func Record(recorder record.EventRecorder, object runtime.Object, reason Reason, message string) {
	recorder.Event(object, reason.Type(), reason.String(), message)
}

// Events about the module in service, on the CCM's Pod.
const (
	// ModuleShadowing: a changed module runs in shadow beside the one in
	// service, which still answers (module.rollout.shadow); recorded when
	// the shadow period starts, and once more when it has run its duration
	// but still lacks comparisons.
	ModuleShadowing Normal = "ModuleShadowing"
	// ModuleReloaded: a changed module was promoted and is in service; the
	// message summarises its shadow comparison.
	ModuleReloaded Normal = "ModuleReloaded"
	// ModuleRejected: a changed module did not load, or disagreed in shadow
	// with the one in service (the message names the first disagreements);
	// the module in service stays, and the rejected one is not tried again
	// until the module file changes.
	ModuleRejected Warning = "ModuleRejected"
	// ModuleRolledBack: a promoted module failed too many calls within the
	// rollback window (module.rollout.rollback) and the previous module is
	// back in service.
	ModuleRolledBack Warning = "ModuleRolledBack"
	// ModuleStart: the CCM started with another module than the configured
	// one (the last-known-good), or without the shadow period it would have
	// had, e.g. because the last-known-good record could not be read.
	ModuleStart Warning = "ModuleStart"
	// ModuleCodeStuck: guest code ran on past its deadline and the host's
	// abort margin, which the host's checks should make impossible; the
	// host gave its pool slot back and leaves its instance, and the memory
	// it holds, until it returns (wasmccm_module_instances_stuck). Report
	// it with the module: it is a hole in the sandbox.
	ModuleCodeStuck Warning = "ModuleCodeStuck"
)

// Events about what the module's answers or requests would do.
const (
	// NodeDeletionDeferred: the module answered that a Node's instance is
	// gone, but the deletion budget (safety.maxNodeDeletions) is spent and
	// nothing corroborates the answer, so the Node stays until the window
	// slides. Recorded on the Node and on the CCM's Pod, once per Node per
	// window.
	NodeDeletionDeferred Warning = "NodeDeletionDeferred"
	// CloudRateLimited: requests to a cloud origin were throttled, by the
	// host's budget (http.rateLimits) or by the cloud's 429; on the CCM's
	// Pod, at most once a minute.
	CloudRateLimited Warning = "CloudRateLimited"
	// CloudAuthFailed: a credential could not be applied to the module's
	// requests (a missing or malformed secret, a failed token exchange);
	// the module's calls fail with the same error meanwhile. On the CCM's
	// Pod, at most once a minute per credential.
	CloudAuthFailed Warning = "CloudAuthFailed"
)

// Events of the orphan load balancer sweep (orphanSweep), on the Service
// the load balancer was made for when the listing names it, else on the
// CCM's Pod.
const (
	// OrphanLoadBalancerFound: a module's load balancer was made for a
	// Service that no longer wants one from that module (gone, no longer
	// of type LoadBalancer, or of a class no module serves); it is deleted
	// at the next sweep unless a Service claims it.
	OrphanLoadBalancerFound Normal = "OrphanLoadBalancerFound"
	// OrphanLoadBalancerDeleted: two consecutive sweeps found the load
	// balancer orphaned and it was deleted.
	OrphanLoadBalancerDeleted Normal = "OrphanLoadBalancerDeleted"
	// OrphanLoadBalancerDeferred: a confirmed orphan was not deleted yet
	// because orphanSweep.maxDeletionsPerHour was reached.
	OrphanLoadBalancerDeferred Warning = "OrphanLoadBalancerDeferred"
	// OrphanLoadBalancerDeleteFailed: deleting a confirmed orphan failed;
	// the next sweep tries again.
	OrphanLoadBalancerDeleteFailed Warning = "OrphanLoadBalancerDeleteFailed"
	// OrphanLoadBalancerNotRemoved: the module reported the deletion of an
	// orphan a success, yet the next listing still has it; the sweep does
	// not try it again until the CCM restarts.
	OrphanLoadBalancerNotRemoved Warning = "OrphanLoadBalancerNotRemoved"
)

// Events of a CCM serving several modules (runtime/assembly), on the
// Node.
const (
	// NodeNotRouted: no module serves the Node: its provider ID has no
	// module's prefix, or, before it has one, no module's rule matches it
	// and no module is the default. The Node is left as it is, never
	// deleted; recorded at most once per Node per ten minutes.
	NodeNotRouted Warning = "NodeNotRouted"
	// ModuleAnswerRefused: a module answered about a Node a provider ID
	// outside its own prefix; the answer is not used.
	ModuleAnswerRefused Warning = "ModuleAnswerRefused"
)

// Events of a CCM serving several modules (runtime/assembly), on the
// CCM's Pod.
const (
	// ModuleStartFailed: a module could not start (its file missing or
	// refused, and no last-known-good); its Nodes and Services wait while
	// the other modules serve, and its start is tried again after 10 s,
	// the wait doubling up to 5 minutes. Recorded at each try.
	ModuleStartFailed Warning = "ModuleStartFailed"
)
