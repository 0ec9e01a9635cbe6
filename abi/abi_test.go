package abi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func sampleNode() Node {
	return Node{
		Name: "node-a", UID: "8f1c", ProviderID: "simcloud://i-1",
		Labels:      map[string]string{"a": "1", "b": ""},
		Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"},
		Addresses:   []NodeAddress{{"InternalIP", "10.0.0.1"}, {"Hostname", "node-a"}},
		PodCIDRs:    []string{"10.244.1.0/24", "fd00::/64"},
	}
}

func sampleService() Service {
	return Service{
		Namespace: "default", Name: "web", UID: "u-1",
		Annotations:       map[string]string{"x": "y"},
		Ports:             []ServicePort{{"http", "TCP", 80, 30080}, {"dns", "UDP", 53, -1}},
		LoadBalancerClass: "", LoadBalancerIP: "203.0.113.9",
		ExternalTrafficPolicy:    "Local",
		LoadBalancerSourceRanges: []string{"0.0.0.0/0"},
		IPFamilies:               []string{"IPv4"},
		HealthCheckNodePort:      31000,
		Status:                   LoadBalancerStatus{Ingress: []LoadBalancerIngress{{IP: "203.0.113.10", IPMode: "VIP"}}},
	}
}

// roundTrip encodes and decodes every message type with representative
// values; a field forgotten on either side shows up as a mismatch.
func TestRoundTrip(t *testing.T) {
	node := sampleNode()
	svc := sampleService()
	b, s := Bool(true), String("lb-name")
	strs := Strings{"c1", "c2"}
	addrs := NodeAddresses{{"ExternalIP", "198.51.100.1"}}
	routes := Routes{{Name: "r", TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24", Blackhole: true,
		TargetNodeAddresses: []NodeAddress{{"InternalIP", "10.0.0.1"}}}}
	cases := []struct {
		name string
		in   Message
		out  Message
	}{
		{"Node", &node, &Node{}},
		{"Service", &svc, &Service{}},
		{"InstanceMetadata", &InstanceMetadata{ProviderID: "p", InstanceType: "t", Zone: "z", Region: "r",
			NodeAddresses: addrs, AdditionalLabels: map[string]string{"k": "v"}}, &InstanceMetadata{}},
		{"LoadBalancerRequest", &LoadBalancerRequest{ClusterName: "c", Service: svc, Nodes: []Node{node, node}}, &LoadBalancerRequest{}},
		{"LoadBalancerNodes", &LoadBalancerNodes{Nodes: []Node{node, node}}, &LoadBalancerNodes{}},
		{"GetLoadBalancerResult", &GetLoadBalancerResult{Status: svc.Status, Exists: true}, &GetLoadBalancerResult{}},
		{"RouteRequest", &RouteRequest{ClusterName: "c", NameHint: "uid", Route: routes[0]}, &RouteRequest{}},
		{"Routes", &routes, &Routes{}},
		{"Zone", &Zone{"z1", "r1"}, &Zone{}},
		{"Bool", &b, new(Bool)},
		{"String", &s, new(String)},
		{"Strings", &strs, &Strings{}},
		{"NodeAddresses", &addrs, &NodeAddresses{}},
		{"InitRequest", &InitRequest{ClusterName: "c", Config: []byte("endpoint: x\n")}, &InitRequest{}},
		{"HTTPRequest", &HTTPRequest{Method: "POST", URL: "https://api/x", Headers: []Header{{"A", "1"}, {"A", "2"}},
			Body: []byte(`{}`), TimeoutMillis: 1500}, &HTTPRequest{}},
		{"HTTPResponse", &HTTPResponse{StatusCode: 429, Headers: []Header{{"Retry-After", "3"}}, Body: []byte("x")}, &HTTPResponse{}},
		{"HTTPResponse error", &HTTPResponse{Error: "denied"}, &HTTPResponse{}},
		{"Empty", &Empty{}, &Empty{}},
		{"OwnedLoadBalancers", &OwnedLoadBalancers{{Name: "a1b2", ID: "42", ClusterName: "c", ServiceUID: "u-1",
			ServiceNamespace: "default", ServiceName: "web"}, {Name: "x", ServiceUID: "u-2"}}, &OwnedLoadBalancers{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wire := Marshal(nil, tc.in)
			if err := Unmarshal(wire, tc.out); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(tc.in, tc.out) {
				t.Fatalf("round trip mismatch:\n in: %#v\nout: %#v", tc.in, tc.out)
			}
			// Every strict prefix is a truncated message and must be rejected.
			for i := 0; i < len(wire); i++ {
				if err := Unmarshal(wire[:i], tc.out); err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded without error", i, len(wire))
				}
			}
		})
	}
}

func TestResultEnvelope(t *testing.T) {
	meta := InstanceMetadata{ProviderID: "simcloud://i-1", Zone: "z"}
	cases := []struct {
		name    string
		outcome Outcome
		want    Outcome
	}{
		{"ok", Outcome{Status: StatusOK}, Outcome{Status: StatusOK}},
		{"not found", Outcome{Status: StatusNotFound, Message: "gone"}, Outcome{Status: StatusNotFound, Message: "gone"}},
		{"retry", Outcome{Status: StatusRetryAfter, Message: "busy", RetryAfter: 2500 * time.Millisecond},
			Outcome{Status: StatusRetryAfter, Message: "busy", RetryAfter: 2500 * time.Millisecond}},
		{"retry capped", Outcome{Status: StatusRetryAfter, RetryAfter: 1000 * time.Hour},
			Outcome{Status: StatusRetryAfter, RetryAfter: maxRetryAfter}},
		{"error", Outcome{Status: StatusError, Message: "boom"}, Outcome{Status: StatusError, Message: "boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wire := EncodeResult(nil, tc.outcome, &meta)
			var got InstanceMetadata
			o, err := DecodeResult(wire, &got)
			if err != nil {
				t.Fatal(err)
			}
			if o != tc.want {
				t.Fatalf("outcome = %+v, want %+v", o, tc.want)
			}
			if tc.want.Status == StatusOK && got.ProviderID != meta.ProviderID {
				t.Fatalf("payload lost: %+v", got)
			}
			if tc.want.Status != StatusOK && got.ProviderID != "" {
				t.Fatalf("payload decoded for status %v", o.Status)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name string
		wire []byte
		msg  Message
	}{
		{"unknown status", []byte{byte(statusCount)}, nil},
		{"trailing bytes", append(EncodeResult(nil, Outcome{}, nil), 0), nil},
		{"count larger than input", []byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f}, &Strings{}},
		{"bool out of range", []byte{0, 2}, new(Bool)},
		{"int32 overflow", []byte{0, 0x80, 0x80, 0x80, 0x80, 0x20}, &Zone{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeResult(tc.wire, tc.msg)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestCapabilitiesAreDisjoint(t *testing.T) {
	seen := map[string]Capability{}
	for _, c := range Capabilities {
		if len(c.Exports) == 0 {
			t.Fatalf("%s has no exports", c.Capability)
		}
		for _, name := range c.Exports {
			if prev, dup := seen[name]; dup {
				t.Fatalf("%s listed under %s and %s", name, prev, c.Capability)
			}
			seen[name] = c.Capability
		}
	}
}

func TestPackResult(t *testing.T) {
	ptr, size := UnpackResult(PackResult(0xdeadbeef, 0x10))
	if ptr != 0xdeadbeef || size != 0x10 {
		t.Fatalf("got %x %x", ptr, size)
	}
}

// TestMethodsCoverEveryExport keeps the method table and the capability
// table in step.
func TestMethodsCoverEveryExport(t *testing.T) {
	exports := map[string]bool{ExportInit: true}
	for _, c := range Capabilities {
		for _, e := range c.Exports {
			exports[e] = true
		}
	}
	for _, o := range OptionalExports {
		if exports[o.Export] {
			t.Errorf("optional export %s is also a capability's export", o.Export)
		}
		exports[o.Export] = true
	}
	for _, m := range Methods {
		if !exports[m.Export] {
			t.Errorf("method %s names unknown export %s", m.Name, m.Export)
		}
		delete(exports, m.Export)
		if got, ok := LookupMethod(m.Name); !ok || got.Export != m.Export {
			t.Errorf("LookupMethod(%s) failed", m.Name)
		}
	}
	for e := range exports {
		t.Errorf("export %s has no method entry", e)
	}
}

// TestUnmarshalShared: strings decoded by UnmarshalShared equal those of
// Unmarshal and, like them, do not change when the input buffer is reused.
func TestUnmarshalShared(t *testing.T) {
	in := &LoadBalancerRequest{ClusterName: "c", Service: sampleService(), Nodes: []Node{sampleNode(), sampleNode()}}
	buf := Marshal(nil, in)
	var copied, shared LoadBalancerRequest
	if err := Unmarshal(buf, &copied); err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalShared(buf, &shared); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	if !reflect.DeepEqual(&shared, &copied) || !reflect.DeepEqual(&shared, in) {
		t.Fatalf("UnmarshalShared gave %+v, want %+v", shared, in)
	}
}

// TestUnmarshalOwning: a body decoded by UnmarshalOwning equals that of
// Unmarshal and is a slice of the input, which later bytes of the input
// cannot overwrite through it.
func TestUnmarshalOwning(t *testing.T) {
	in := &HTTPResponse{StatusCode: 200, Headers: []Header{{"Content-Type", "application/json"}}, Body: []byte(`{"id":1}`), Error: "e"}
	buf := Marshal(nil, in)
	var owning HTTPResponse
	if err := UnmarshalOwning(buf, &owning); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&owning, in) {
		t.Fatalf("UnmarshalOwning gave %+v, want %+v", owning, in)
	}
	if i := bytes.Index(buf, in.Body); i < 0 || &buf[i] != &owning.Body[0] {
		t.Fatal("the body is a copy, not a slice of the input")
	}
	if cap(owning.Body) != len(owning.Body) {
		t.Fatalf("the body's capacity %d reaches past it (%d bytes) into the input", cap(owning.Body), len(owning.Body))
	}
}

// TestSameNodes: one Node list is the same slice of the same array; an
// equal copy, a shorter slice of the array and a list of other Nodes are
// not, and lists without Nodes are all one.
func TestSameNodes(t *testing.T) {
	list := []Node{{Name: "a"}, {Name: "b"}}
	for _, c := range []struct {
		name string
		a, b []Node
		same bool
	}{
		{"the same slice", list, list, true},
		{"an equal copy", list, []Node{{Name: "a"}, {Name: "b"}}, false},
		{"a shorter slice of the array", list, list[:1], false},
		{"a later slice of the array", list[1:], list[:1], false},
		{"nil and empty", nil, []Node{}, true},
		{"nil and a list", nil, list, false},
	} {
		if got := SameNodes(c.a, c.b); got != c.same {
			t.Errorf("%s: SameNodes = %v, want %v", c.name, got, c.same)
		}
	}
}
