package simcloud

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ProviderIDPrefix is the scheme of Kubernetes provider IDs for simcloud
// instances: the provider ID of instance "i-0001" is "simcloud://i-0001".
const ProviderIDPrefix = "simcloud://"

// Instance states.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

// Address types, named like Kubernetes NodeAddressType so the provider can
// copy them through unchanged.
const (
	AddressInternalIP  = "InternalIP"
	AddressExternalIP  = "ExternalIP"
	AddressHostname    = "Hostname"
	AddressInternalDNS = "InternalDNS"
	AddressExternalDNS = "ExternalDNS"
)

// Load balancer port protocols.
const (
	ProtocolTCP = "TCP"
	ProtocolUDP = "UDP"
)

// Instance is a virtual machine. Name matches the Kubernetes Node name.
type Instance struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Zone      string    `json:"zone"`
	Region    string    `json:"region"`
	Type      string    `json:"type"`
	State     string    `json:"state"`
	Addresses []Address `json:"addresses"`
	// Labels are extra labels the provider publishes on the Node.
	Labels map[string]string `json:"labels,omitempty"`
}

// ProviderID returns the Kubernetes provider ID of the instance.
func (i Instance) ProviderID() string { return ProviderIDPrefix + i.ID }

// Address is one address of an instance.
type Address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// LoadBalancer is a network load balancer forwarding ports to the node
// ports of its target instances.
type LoadBalancer struct {
	// ID is assigned by the cloud; ignored on input.
	ID string `json:"id"`
	// Name is chosen by the client and unique; it is the resource key.
	Name string `json:"name"`
	// IP is allocated from the pool on create unless requested explicitly.
	IP           string            `json:"ip"`
	Ports        []Port            `json:"ports"`
	Targets      []string          `json:"targets"`
	HealthCheck  *HealthCheck      `json:"healthCheck,omitempty"`
	SourceRanges []string          `json:"sourceRanges,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// Port is one listener of a load balancer.
type Port struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
	NodePort int    `json:"nodePort"`
}

// HealthCheck is an HTTP health check against a node port of each target.
type HealthCheck struct {
	NodePort int    `json:"nodePort"`
	Path     string `json:"path,omitempty"`
}

// Route sends traffic for a destination CIDR (a node's pod CIDR) to an
// instance.
type Route struct {
	// ID is assigned by the cloud; ignored on input.
	ID              string `json:"id"`
	Name            string `json:"name"`
	DestinationCIDR string `json:"destinationCIDR"`
	TargetInstance  string `json:"targetInstance"`
	// TargetName is the name of the target instance. On output it is
	// filled in from the instance (empty for blackhole routes); on input
	// it may be given instead of TargetInstance.
	TargetName string `json:"targetName,omitempty"`
	// Blackhole reports that the target instance no longer exists.
	// Output only.
	Blackhole bool `json:"blackhole,omitempty"`
}

// Zone is a zone and the region it belongs to.
type Zone struct {
	Zone   string `json:"zone"`
	Region string `json:"region"`
}

// Errors returned by the Go API; the HTTP layer maps them to status codes
// (404, 409, 400 and 503 respectively). Test with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrInvalid   = errors.New("invalid request")
	ErrExhausted = errors.New("ip pool exhausted")
)

// apiError carries a readable message while still matching one of the
// sentinel errors above.
type apiError struct {
	kind error
	msg  string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &apiError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func cloneInstance(in Instance) Instance {
	in.Addresses = slices.Clone(in.Addresses)
	if in.Addresses == nil {
		in.Addresses = []Address{}
	}
	in.Labels = cloneMap(in.Labels)
	return in
}

func cloneLoadBalancer(lb LoadBalancer) LoadBalancer {
	lb.Ports = slices.Clone(lb.Ports)
	if lb.Ports == nil {
		lb.Ports = []Port{}
	}
	lb.Targets = slices.Clone(lb.Targets)
	if lb.Targets == nil {
		lb.Targets = []string{}
	}
	if lb.HealthCheck != nil {
		hc := *lb.HealthCheck
		lb.HealthCheck = &hc
	}
	lb.SourceRanges = slices.Clone(lb.SourceRanges)
	if len(lb.SourceRanges) == 0 {
		lb.SourceRanges = nil
	}
	lb.Tags = cloneMap(lb.Tags)
	return lb
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// validName reports whether s can be used as a resource name or ID: it
// appears as a single URL path segment, so it is restricted to a safe
// character set and must start with a letter or digit.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '-' || r == '_' || r == '.'):
		default:
			return false
		}
	}
	return true
}
