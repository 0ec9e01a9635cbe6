package abi

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodeResult feeds arbitrary bytes, as a hostile guest could return
// them, to the decoder of every method's result. Decoding must fail
// cleanly or produce a message that encodes back to a decodable result.
func FuzzDecodeResult(f *testing.F) {
	node := sampleNode()
	svc := sampleService()
	f.Add(EncodeResult(nil, Outcome{}, &InstanceMetadata{ProviderID: "p", NodeAddresses: node.Addresses, AdditionalLabels: node.Labels}))
	f.Add(EncodeResult(nil, Outcome{}, &GetLoadBalancerResult{Status: svc.Status, Exists: true}))
	f.Add(EncodeResult(nil, Outcome{Status: StatusRetryAfter, Message: "slow down", RetryAfter: 1500}, nil))
	f.Add(EncodeResult(nil, Outcome{}, &Routes{{Name: "r", DestinationCIDR: "10.0.0.0/24"}}))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range Methods {
			if m.Output == nil {
				continue
			}
			out := m.Output()
			o, err := DecodeResult(data, out)
			if err != nil {
				continue
			}
			again := EncodeResult(nil, o, out)
			if _, err := DecodeResult(again, m.Output()); err != nil {
				t.Fatalf("%s: re-encoded result does not decode: %v", m.Name, err)
			}
		}
	})
}

// FuzzDecodeRequest covers the guest side: the SDK decodes what the host
// sends with the same decoder, strings shared or not and byte slices owned
// or not, which must agree.
func FuzzDecodeRequest(f *testing.F) {
	svc := sampleService()
	f.Add(Marshal(nil, &LoadBalancerRequest{ClusterName: "c", Service: svc, Nodes: []Node{sampleNode()}}))
	f.Add(Marshal(nil, &HTTPResponse{StatusCode: 200, Headers: []Header{{"A", "b"}}, Body: []byte("{}")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := []func() Message{func() Message { return &HTTPRequest{} }, func() Message { return &HTTPResponse{} }}
		for _, m := range Methods {
			inputs = append(inputs, m.Input)
		}
		for _, in := range inputs {
			copied := in()
			err := Unmarshal(data, copied)
			for name, unmarshal := range map[string]func([]byte, Message) error{"UnmarshalShared": UnmarshalShared, "UnmarshalOwning": UnmarshalOwning} {
				other := in()
				otherErr := unmarshal(bytes.Clone(data), other)
				if (err == nil) != (otherErr == nil) || err == nil && !reflect.DeepEqual(copied, other) {
					t.Fatalf("%T: Unmarshal gave %+v, %v; %s %+v, %v", copied, copied, err, name, other, otherErr)
				}
			}
		}
	})
}
