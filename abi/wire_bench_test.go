package abi

import (
	"strconv"
	"testing"
)

// lbRequest1000 is a load balancer call over 1,000 Nodes as the CCM sends
// it: names, UIDs, provider IDs and addresses.
func lbRequest1000() *LoadBalancerRequest {
	req := &LoadBalancerRequest{ClusterName: "c", Service: sampleService()}
	for i := range 1000 {
		name := "node-" + strconv.Itoa(i)
		req.Nodes = append(req.Nodes, Node{
			Name: name, UID: "6f1c2d3e-0000-4000-8000-" + strconv.Itoa(100000000000+i), ProviderID: "simcloud://i-" + strconv.Itoa(i),
			Addresses: []NodeAddress{{Type: "InternalIP", Address: "10.0.0." + strconv.Itoa(i)}, {Type: "Hostname", Address: name}},
		})
	}
	return req
}

// BenchmarkMarshalLoadBalancerRequest is the host's encoding of a load
// balancer call over 1,000 Nodes, into a reused buffer.
func BenchmarkMarshalLoadBalancerRequest(b *testing.B) {
	req := lbRequest1000()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = Marshal(buf, req)
	}
}

// BenchmarkUnmarshalLoadBalancerRequest is the guest's decoding of it,
// strings copied one by one or sharing one copy of the input.
func BenchmarkUnmarshalLoadBalancerRequest(b *testing.B) {
	msg := Marshal(nil, lbRequest1000())
	for _, tc := range []struct {
		name      string
		unmarshal func([]byte, Message) error
	}{{"copied", Unmarshal}, {"shared", UnmarshalShared}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req LoadBalancerRequest
				if err := tc.unmarshal(msg, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
