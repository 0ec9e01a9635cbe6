package provider

import (
	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/abi"
)

// The conversions copy only what the wire types carry; the controllers'
// objects are never modified (they come from informer caches).

func toNode(n *v1.Node) abi.Node {
	if n == nil {
		return abi.Node{}
	}
	return abi.Node{
		Name:        n.Name,
		UID:         string(n.UID),
		ProviderID:  n.Spec.ProviderID,
		Labels:      n.Labels,
		Annotations: n.Annotations,
		Addresses:   toAddresses(n.Status.Addresses),
		PodCIDRs:    n.Spec.PodCIDRs,
	}
}

func toAddresses(in []v1.NodeAddress) []abi.NodeAddress {
	if len(in) == 0 {
		return nil
	}
	out := make([]abi.NodeAddress, len(in))
	for i, a := range in {
		out[i] = abi.NodeAddress{Type: string(a.Type), Address: a.Address}
	}
	return out
}

func fromAddresses(in []abi.NodeAddress) []v1.NodeAddress {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1.NodeAddress, len(in))
	for i, a := range in {
		out[i] = v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address}
	}
	return out
}

func toService(s *v1.Service) abi.Service {
	out := abi.Service{
		Namespace:                s.Namespace,
		Name:                     s.Name,
		UID:                      string(s.UID),
		Annotations:              s.Annotations,
		LoadBalancerIP:           s.Spec.LoadBalancerIP,
		ExternalTrafficPolicy:    string(s.Spec.ExternalTrafficPolicy),
		LoadBalancerSourceRanges: s.Spec.LoadBalancerSourceRanges,
		HealthCheckNodePort:      s.Spec.HealthCheckNodePort,
		Status:                   toLBStatus(&s.Status.LoadBalancer),
	}
	if s.Spec.LoadBalancerClass != nil {
		out.LoadBalancerClass = *s.Spec.LoadBalancerClass
	}
	for _, f := range s.Spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	for _, p := range s.Spec.Ports {
		out.Ports = append(out.Ports, abi.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	return out
}

func toLBStatus(s *v1.LoadBalancerStatus) abi.LoadBalancerStatus {
	var out abi.LoadBalancerStatus
	for _, in := range s.Ingress {
		ing := abi.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		if in.IPMode != nil {
			ing.IPMode = string(*in.IPMode)
		}
		out.Ingress = append(out.Ingress, ing)
	}
	return out
}

func fromLBStatus(s *abi.LoadBalancerStatus) *v1.LoadBalancerStatus {
	out := &v1.LoadBalancerStatus{}
	for _, in := range s.Ingress {
		ing := v1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		if in.IPMode != "" {
			mode := v1.LoadBalancerIPMode(in.IPMode)
			ing.IPMode = &mode
		}
		out.Ingress = append(out.Ingress, ing)
	}
	return out
}
