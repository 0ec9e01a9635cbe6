// Package work is the work a provider module does inside one call,
// split into its parts so that each can be timed alone, in a module (see
// testdata/guestwork) and natively: decoding the cloud's JSON answers
// with encoding/json, and decoding the ABI messages the host sends.
//
// The JSON types and bodies are those of modules/simcloud and the
// simulated cloud; it imports only the standard library and package abi,
// so it builds with TinyGo too.
package work

import (
	"encoding/json"
	"strconv"

	"github.com/wasmccm/wasmccm/abi"
)

// Kinds of work.
const (
	// JSONInstanceList decodes the answer to GET /v1/instances?name=...
	// (one instance), as InstanceMetadata does when initializing a Node.
	JSONInstanceList = iota
	// JSONLoadBalancer decodes a load balancer with 50 targets, as
	// EnsureLoadBalancer does with the answer to its GET.
	JSONLoadBalancer
	// ABINode decodes the Node of an InstancesV2 call.
	ABINode
	// ABILoadBalancerRequest decodes an EnsureLoadBalancer request with
	// 50 Nodes.
	ABILoadBalancerRequest
	// ABIHTTPResponse decodes the HTTPResponse of http_do carrying the
	// instance list.
	ABIHTTPResponse
	// Loop walks a linked list of LoopLength elements: one loop
	// iteration each, to time what a loop iteration costs in a module
	// (see BenchmarkGuest).
	Loop
	// Kinds is the number of kinds.
	Kinds
)

// Names are the kinds' names, for benchmark names.
var Names = [Kinds]string{"json-instance-list", "json-loadbalancer-50", "abi-node", "abi-lb-request-50", "abi-http-response", "loop-1000"}

// The types modules/simcloud decodes.
type instance struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Zone      string            `json:"zone"`
	Region    string            `json:"region"`
	Type      string            `json:"type"`
	State     string            `json:"state"`
	Addresses []address         `json:"addresses"`
	Labels    map[string]string `json:"labels"`
}

type address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

type loadBalancer struct {
	Name         string            `json:"name"`
	IP           string            `json:"ip"`
	Ports        []lbPort          `json:"ports"`
	Targets      []string          `json:"targets"`
	HealthCheck  *healthCheck      `json:"healthCheck"`
	SourceRanges []string          `json:"sourceRanges"`
	Tags         map[string]string `json:"tags"`
}

type lbPort struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort"`
}

type healthCheck struct {
	NodePort int32  `json:"nodePort"`
	Path     string `json:"path"`
}

// InstanceListBody is what the simulated cloud answers to
// GET /v1/instances?name=node-0042.
const InstanceListBody = `[{"id":"i-0042","name":"node-0042","zone":"sim-1b","region":"sim-1","type":"sim.medium","state":"running","addresses":[{"type":"InternalIP","address":"10.0.0.43"},{"type":"ExternalIP","address":"198.51.0.43"},{"type":"Hostname","address":"node-0042"}],"labels":{"simcloud.example/pool":"default"}}]`

var (
	instanceList = []byte(InstanceListBody)
	lbBody       []byte
	nodeMsg      []byte
	lbRequestMsg []byte
	httpRespMsg  []byte
)

func init() {
	b := []byte(`{"id":"lb-0001","name":"a0b9f3c527d1e4a8b9c3d2e4f5a6b7c8","ip":"192.0.2.10","ports":[{"name":"http","protocol":"TCP","port":80,"nodePort":30080}],"targets":[`)
	for i := 1; i <= 50; i++ {
		if i > 1 {
			b = append(b, ',')
		}
		b = append(b, `"i-`...)
		b = append(b, pad4(i)...)
		b = append(b, '"')
	}
	b = append(b, `],"tags":{"wasmccm.io/cluster":"bench","wasmccm.io/service":"default/web"}}`...)
	lbBody = b

	nodeMsg = abi.Marshal(nil, Node(42))
	req := &abi.LoadBalancerRequest{ClusterName: "bench", Service: abi.Service{Namespace: "default", Name: "web",
		UID: "0b9f3c52-7d1e-4a8b-9c3d-2e4f5a6b7c8d", Ports: []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}}}
	for i := 1; i <= 50; i++ {
		req.Nodes = append(req.Nodes, *Node(i))
	}
	lbRequestMsg = abi.Marshal(nil, req)
	httpRespMsg = abi.Marshal(nil, &abi.HTTPResponse{StatusCode: 200, Body: instanceList, Headers: []abi.Header{
		{Name: "Content-Type", Value: "application/json"}, {Name: "Date", Value: "Sun, 22 Nov 2026 00:00:00 GMT"}, {Name: "Content-Length", Value: "300"}}})
}

func pad4(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

// Node is an initialized Node as the controllers pass it (the same as the
// benchmarks' node(i, true)).
func Node(i int) *abi.Node {
	name := "node-" + pad4(i)
	return &abi.Node{
		Name:       name,
		UID:        "6f1c2d3e-0000-4000-8000-00000000" + pad4(i),
		ProviderID: "simcloud://i-" + pad4(i),
		Labels: map[string]string{
			"beta.kubernetes.io/arch":          "amd64",
			"beta.kubernetes.io/os":            "linux",
			"kubernetes.io/arch":               "amd64",
			"kubernetes.io/hostname":           name,
			"kubernetes.io/os":                 "linux",
			"node.kubernetes.io/instance-type": "sim.medium",
			"topology.kubernetes.io/region":    "sim-1",
			"topology.kubernetes.io/zone":      "sim-1b",
		},
		Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		},
		Addresses: []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0." + strconv.Itoa(i+1)}, {Type: "Hostname", Address: name}},
		PodCIDRs:  []string{"10.244." + strconv.Itoa(i%256) + ".0/24"},
	}
}

// Run does iters units of work of kind and returns a number derived from
// the results (so that nothing is optimized away), or -1 on an error.
func Run(kind, iters int) int {
	n := 0
	for range iters {
		switch kind {
		case JSONInstanceList:
			var list []instance
			if json.Unmarshal(instanceList, &list) != nil || len(list) != 1 {
				return -1
			}
			n += len(list[0].Addresses)
		case JSONLoadBalancer:
			var lb loadBalancer
			if json.Unmarshal(lbBody, &lb) != nil {
				return -1
			}
			n += len(lb.Targets)
		case ABINode:
			var node abi.Node
			if abi.Unmarshal(nodeMsg, &node) != nil {
				return -1
			}
			n += len(node.Labels)
		case ABILoadBalancerRequest:
			var req abi.LoadBalancerRequest
			if abi.Unmarshal(lbRequestMsg, &req) != nil {
				return -1
			}
			n += len(req.Nodes)
		case ABIHTTPResponse:
			var resp abi.HTTPResponse
			if abi.Unmarshal(httpRespMsg, &resp) != nil {
				return -1
			}
			n += len(resp.Body)
		case Loop:
			for e := loopList; e != nil; e = e.next {
				n++
			}
		default:
			return -1
		}
	}
	return n
}

// LoopLength is the length of the list Loop walks.
const LoopLength = 1000

type element struct{ next *element }

// loopList is a list rather than a counted loop, whose iterations the
// compiler could unroll or fold away.
var loopList = func() *element {
	var head *element
	for range LoopLength {
		head = &element{next: head}
	}
	return head
}()
