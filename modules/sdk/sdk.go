// Package sdk is the guest SDK for wasmccm provider modules.
//
// A provider author implements the interfaces below, which mirror
// k8s.io/cloud-provider's, over the slim wire types of package abi, and
// registers the implementation from an init function of the module's main
// package:
//
//	func init() {
//		p := mycloud.New(sdk.Imports())
//		sdk.Set(p)             // Init: receives the provider config
//		instancesv2.Set(p)     // each capability package adds its exports
//		loadbalancer.Set(p)
//	}
//
//	func main() {}
//
// A capability is supported exactly when its package under sdk/export is
// linked into the module, because that is what adds its exports; the host
// reports every other capability as unsupported.
//
// Providers reach the cloud through the Host they are given, so the same
// provider code runs natively in-process (for unit tests and benchmarks)
// with a Host from package sdk/native.
// Package sdk/rest calls HTTP/JSON APIs through that Host and maps the
// cloud's answers to the errors below.
//
// The SDK imports only the standard library, so modules build with TinyGo
// (-target=wasip1 -buildmode=c-shared -scheduler=none) and with standard Go
// (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared).
package sdk

import (
	"context"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

// Errors a provider returns to report a specific status to the host; wrap
// them freely (errors.Is is used).
var (
	// ErrNotFound reports that the named instance or object does not exist.
	// InstanceExists must instead return false with a nil error: only that
	// answer lets Kubernetes delete a Node.
	ErrNotFound = guest.ErrNotFound
	// ErrNotImplemented maps to cloudprovider.NotImplemented.
	ErrNotImplemented = guest.ErrNotImplemented
	// ErrImplementedElsewhere maps to cloudprovider.ImplementedElsewhere.
	ErrImplementedElsewhere = guest.ErrImplementedElsewhere
)

// NotFound returns an error with message msg that matches ErrNotFound, for
// a provider to say which object was not found and why.
func NotFound(msg string) error { return &notFoundError{msg} }

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return ErrNotFound }

// RetryAfter returns an error asking the controller to retry after d, as
// cloud-provider's api.RetryError does. Use it for rate limits and other
// transient cloud conditions.
func RetryAfter(d time.Duration, msg string) error { return &guest.RetryError{After: d, Msg: msg} }

// OutcomeOf returns the status, message and delay the SDK reports to the
// host for a provider error. Hosts that call a provider natively use it to
// map errors exactly as a module would.
func OutcomeOf(err error) abi.Outcome { return guest.OutcomeOf(err) }

// Provider is the one interface every module implements.
type Provider interface {
	// Init receives the CCM's cluster name and the opaque provider config
	// from cloud-config. It runs once per instance, before any other call;
	// an error rejects the config and the module is not used.
	Init(ctx context.Context, clusterName string, config []byte) error
}

// InstancesV2 mirrors cloudprovider.InstancesV2.
type InstancesV2 interface {
	// InstanceExists reports whether the node's instance exists. Returning
	// false with a nil error deletes the Node: on any doubt return an error.
	InstanceExists(ctx context.Context, node *abi.Node) (bool, error)
	InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error)
	InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error)
}

// Instances mirrors the legacy cloudprovider.Instances, without
// AddSSHKeyToAllInstances, which the host always reports as not implemented.
type Instances interface {
	NodeAddresses(ctx context.Context, nodeName string) ([]abi.NodeAddress, error)
	NodeAddressesByProviderID(ctx context.Context, providerID string) ([]abi.NodeAddress, error)
	InstanceID(ctx context.Context, nodeName string) (string, error)
	InstanceType(ctx context.Context, nodeName string) (string, error)
	InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error)
	InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error)
	InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error)
	CurrentNodeName(ctx context.Context, hostname string) (string, error)
}

// LoadBalancer mirrors cloudprovider.LoadBalancer. The Service and Nodes are
// read-only, and the Nodes carry only Name, UID, ProviderID and Addresses:
// the list holds every Node of the cluster (abi/README.md §4). On a host
// of ABI revision 6 or later, until the cluster's Nodes change,
// EnsureLoadBalancer and UpdateLoadBalancer get the same list, as the
// same slice (abi.SameNodes), so a provider may keep what it derives from
// it.
type LoadBalancer interface {
	GetLoadBalancer(ctx context.Context, clusterName string, service *abi.Service) (status *abi.LoadBalancerStatus, exists bool, err error)
	GetLoadBalancerName(ctx context.Context, clusterName string, service *abi.Service) string
	EnsureLoadBalancer(ctx context.Context, clusterName string, service *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error)
	UpdateLoadBalancer(ctx context.Context, clusterName string, service *abi.Service, nodes []abi.Node) error
	// EnsureLoadBalancerDeleted must succeed when the load balancer is
	// already gone, and must never return ErrImplementedElsewhere.
	EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *abi.Service) error
}

// LoadBalancerLister is the optional addition to LoadBalancer that lets
// the host delete load balancers whose Service is gone (ABI revision 3;
// export/loadbalancerlist adds the export). ListLoadBalancers returns
// every load balancer the module made for clusterName, and none of another
// cluster's, each with the Service UID it was made for and, when the cloud
// records them, its cluster and the Service's namespace and name. Name
// must be what GetLoadBalancerName answers for that Service. The list must
// be complete: return an error when a listing fails or ends short of what
// the API announced, never a shorter list. A load balancer that cannot be
// tied to a Service UID must be left out. EnsureLoadBalancerDeleted must
// find and delete a listed load balancer from a Service that carries only
// its UID, namespace and name.
type LoadBalancerLister interface {
	ListLoadBalancers(ctx context.Context, clusterName string) ([]abi.OwnedLoadBalancer, error)
}

// Routes mirrors cloudprovider.Routes.
type Routes interface {
	ListRoutes(ctx context.Context, clusterName string) ([]abi.Route, error)
	CreateRoute(ctx context.Context, clusterName string, nameHint string, route *abi.Route) error
	DeleteRoute(ctx context.Context, clusterName string, route *abi.Route) error
}

// Zones mirrors cloudprovider.Zones.
type Zones interface {
	GetZone(ctx context.Context) (abi.Zone, error)
	GetZoneByProviderID(ctx context.Context, providerID string) (abi.Zone, error)
	GetZoneByNodeName(ctx context.Context, nodeName string) (abi.Zone, error)
}

// Clusters mirrors cloudprovider.Clusters.
type Clusters interface {
	ListClusters(ctx context.Context) ([]string, error)
	Master(ctx context.Context, clusterName string) (string, error)
}

var provider Provider

// Set registers the module's provider. Call it from an init function.
func Set(p Provider) { provider = p }

// initialize is the body of the init export.
func initialize(in []byte) []byte {
	var req abi.InitRequest
	return guest.Dispatch(in, &req, func() (abi.Message, error) {
		if provider == nil {
			return nil, errNoProvider
		}
		return nil, provider.Init(guest.Context(), req.ClusterName, req.Config)
	})
}

type sdkError string

func (e sdkError) Error() string { return string(e) }

const errNoProvider = sdkError("sdk: no provider registered; call sdk.Set from an init function of the module")
