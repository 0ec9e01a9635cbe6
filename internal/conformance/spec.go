package conformance

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/abi"
)

// Spec is the author's test-spec file: what the suite may assume about the
// cloud it runs against.
type Spec struct {
	// Nodes are checked with InstanceExists and InstanceMetadata; the
	// existing ones are the test load balancer's targets.
	Nodes []SpecNode `json:"nodes"`
	// LoadBalancer configures the load balancer lifecycle check.
	LoadBalancer SpecLoadBalancer `json:"loadBalancer,omitempty"`
}

// SpecNode is a Node of the test cluster and what the cloud knows of it.
type SpecNode struct {
	Name       string            `json:"name"`
	ProviderID string            `json:"providerID,omitempty"`
	Addresses  []abi.NodeAddress `json:"addresses,omitempty"`
	// Exists is what InstanceExists must answer.
	Exists bool `json:"exists"`
	// InstanceType, Zone and Region, when set, are what InstanceMetadata
	// must answer.
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	Region       string `json:"region,omitempty"`
}

// SpecLoadBalancer configures the test Service.
type SpecLoadBalancer struct {
	// Skip leaves the lifecycle out, e.g. against a cloud where creating
	// load balancers costs money.
	Skip bool `json:"skip,omitempty"`
	// Namespace and Name of the test Service; default
	// wasmccm-conformance/lb. Its UID is derived from them, so a run
	// finds and deletes what an interrupted run left.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Port and NodePort of its one TCP port; default 80 and 30080.
	Port     int32 `json:"port,omitempty"`
	NodePort int32 `json:"nodePort,omitempty"`
}

// ReadSpec reads and checks a test-spec file.
func ReadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("test spec %s: %w", path, err)
	}
	for i, n := range s.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("test spec %s: nodes[%d] has no name", path, i)
		}
	}
	return &s, nil
}

func (s *Spec) service() abi.Service {
	lb := s.LoadBalancer
	ns, name := lb.Namespace, lb.Name
	if ns == "" {
		ns = "wasmccm-conformance"
	}
	if name == "" {
		name = "lb"
	}
	port, nodePort := lb.Port, lb.NodePort
	if port == 0 {
		port = 80
	}
	if nodePort == 0 {
		nodePort = 30080
	}
	return abi.Service{
		Namespace: ns, Name: name, UID: "conformance-" + ns + "-" + name,
		Ports:                 []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: port, NodePort: nodePort}},
		ExternalTrafficPolicy: "Cluster",
	}
}

func (n SpecNode) node() abi.Node {
	return abi.Node{Name: n.Name, UID: "uid-" + n.Name, ProviderID: n.ProviderID, Addresses: n.Addresses}
}

// targets are the Nodes of the existing instances.
func (s *Spec) targets() []abi.Node {
	var nodes []abi.Node
	for _, n := range s.Nodes {
		if n.Exists {
			nodes = append(nodes, n.node())
		}
	}
	return nodes
}
