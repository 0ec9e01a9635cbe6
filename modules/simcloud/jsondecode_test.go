package simcloud

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// The reference types: the package's, without their UnmarshalJSON methods,
// so that encoding/json decodes them by reflection.
type (
	refInstance     instance
	refLoadBalancer loadBalancer
	refRoute        route
	refLBAddress    lbAddress
	refErrorBody    errorBody
)

// decodeBoth decodes data into a fresh value with the hand-written decoder
// and with encoding/json, and fails unless both fail or both give the same
// value. Each is decoded twice into the same value, as a client reusing a
// value would, so that reuse of slices and maps is compared too.
func decodeBoth(t *testing.T, data []byte) {
	t.Helper()
	check := func(kind string, ours, ref any, oursErr, refErr error) {
		t.Helper()
		if (oursErr == nil) != (refErr == nil) {
			t.Fatalf("%s %q: hand-written decoder: %v; encoding/json: %v", kind, data, oursErr, refErr)
		}
		if refErr == nil && !reflect.DeepEqual(ours, ref) {
			t.Fatalf("%s %q:\nhand-written  %#v\nencoding/json %#v", kind, data, ours, ref)
		}
	}
	twice := func(decode func() error) error {
		if err := decode(); err != nil {
			return err
		}
		return decode()
	}

	var in instance
	var refIn refInstance
	e1 := twice(func() error { return in.UnmarshalJSON(data) })
	e2 := twice(func() error { return json.Unmarshal(data, &refIn) })
	check("instance", in, instance(refIn), e1, e2)

	var lb loadBalancer
	var refLB refLoadBalancer
	e1 = twice(func() error { return lb.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refLB) })
	check("load balancer", lb, loadBalancer(refLB), e1, e2)

	var addr lbAddress
	var refAddr refLBAddress
	e1 = twice(func() error { return addr.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refAddr) })
	check("load balancer address", addr, lbAddress(refAddr), e1, e2)

	var eb errorBody
	var refEB refErrorBody
	e1 = twice(func() error { return eb.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refEB) })
	check("error body", eb, errorBody(refEB), e1, e2)

	var r route
	var refR refRoute
	e1 = twice(func() error { return r.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refR) })
	check("route", r, route(refR), e1, e2)

	var list instanceList
	var refList []refInstance
	e1 = twice(func() error { return list.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refList) })
	var converted []instance
	if refList != nil {
		converted = make([]instance, len(refList))
		for i := range refList {
			converted[i] = instance(refList[i])
		}
	}
	check("instance list", []instance(list), converted, e1, e2)

	// The stream, one reused instance, fails as the list does and hands
	// over instances the snapshot encodes as it encodes the list's.
	var streamed [][]byte
	stream := &instanceStream{each: func(in *instance) error {
		streamed = append(streamed, appendInstance(nil, in))
		return nil
	}}
	if err := stream.UnmarshalJSON(data); (err == nil) != (e1 == nil) {
		t.Fatalf("instance stream: error %v, list's %v", err, e1)
	} else if err == nil {
		if stream.listed != (list != nil) || len(streamed) != len(list) {
			t.Fatalf("instance stream: listed %t with %d instances, list %v", stream.listed, len(streamed), list)
		}
		for i := range list {
			if want := appendInstance(nil, &list[i]); !bytes.Equal(streamed[i], want) {
				t.Fatalf("instance stream: instance %d encodes as %q, the list's as %q", i, streamed[i], want)
			}
		}
	}

	var routes routeList
	var refRoutes []refRoute
	e1 = twice(func() error { return routes.UnmarshalJSON(data) })
	e2 = twice(func() error { return json.Unmarshal(data, &refRoutes) })
	var convertedRoutes []route
	if refRoutes != nil {
		convertedRoutes = make([]route, len(refRoutes))
		for i := range refRoutes {
			convertedRoutes[i] = route(refRoutes[i])
		}
	}
	check("route list", []route(routes), convertedRoutes, e1, e2)
}

// jsonSeeds are the cloud's real answers and the corners of the format.
var jsonSeeds = []string{
	`{"id":"i-1","name":"node-a","zone":"zone-a","region":"region-1","type":"m5.large","state":"running","addresses":[{"type":"InternalIP","address":"10.0.0.1"}],"labels":{"team":"x"}}`,
	`[{"id":"i-1","name":"a"},{"id":"i-2","name":"b","addresses":null}]`,
	`[{"id":"a","addresses":[{"type":"t","address":"x"},{"type":"u"}],"labels":{"k":"v"}},{"id":"b","addresses":[{"address":"y"}]},{"labels":null},{"labels":{}}]`,
	`{"name":"lb","ip":"192.0.2.7","ports":[{"name":"http","protocol":"TCP","port":80,"nodePort":30080}],"targets":["i-1","i-2"],"healthCheck":{"nodePort":31000,"path":"/healthz"},"sourceRanges":["0.0.0.0/0"],"tags":{"cluster":"k"}}`,
	`[{"name":"k-r1","destinationCIDR":"10.244.0.0/24","targetInstance":"i-1","targetName":"a","blackhole":false}]`,
	`{"ID":"upper","NAME":"case","\u212Aey":1,"Ports":[{"PORT":1}]}`,
	`{"addresses":[{"type":"a"},{"address":"b"}],"addresses":[{"address":"c"}],"labels":{"a":"1"},"labels":{"b":null}}`,
	`{"ports":[{"port":2147483648}]}`, `{"ports":[{"port":1.0}]}`, `{"ports":[{"port":-0}]}`, `{"blackhole":"true"}`,
	`{"id":5,"name":"still decoded"}`, `{"healthCheck":null}`, `{"healthCheck":{"path":"/a"},"healthCheck":{"nodePort":1}}`,
	`{"name":"\ud83d\ude00 \ud800 \u00e9 \"q\" \\ \/ \b\f\n\r\t"}`, "{\"name\":\"\xff\xfe\xed\xa0\x80\"}",
	`null`, `[]`, `{}`, ` {"targets":[]} `, `{"targets":[null,"a"]}`, `"text"`, `1`, `true`,
	`{"id":"x"} x`, `{"id":"x",}`, `{"id" "x"}`, `[1,]`, `{"id":"\u12"}`, `{"id":"a` + "\x01" + `"}`, ``, `{"unknown":{"deep":[1,2,{"x":null}]},"id":"y"}`,
	`{"error":"no such load balancer"}`, `{"error":null}`, `{"error":5}`, `{"ERROR":"a","error":null}`, `{"error":"a","error":"b"}`,
	`{"targets":["\x"],"ip":"1"}`, `{"targets":["\ud800","\u00e9",5,"` + "\xff" + `"],"ip":"192.0.2.1"}`, `{"targets":["a` + "\x01" + `"]}`, `{"targets":["a`,
	`{"ports":[{"port":1e2}]}`, `{"ports":[{"port":01}]}`, `{"ports":[{"port":-}]}`, `{"tags":[]}`, `{"targets":{}}`,
}

func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, seed := range jsonSeeds {
		decodeBoth(t, []byte(seed))
	}
}

// FuzzDecodeAgreesWithEncodingJSON: for any input, the hand-written
// decoder fails exactly when encoding/json fails and otherwise gives the
// same values.
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range jsonSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(decodeBoth)
}

// TestPlainPrefix: plainPrefix counts what a byte-by-byte loop counts, for
// every byte value at every position, near the end of the input or not.
func TestPlainPrefix(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for pos := range 10 {
		for c := range 256 {
			b := []byte("abcdefghij")
			b[pos] = byte(c)
			for n := range len(b) + 1 {
				s := string(b[:n])
				for from := 0; from <= min(2, n); from++ {
					want := 0
					for want < 8 && from+want < n && plain(s[from+want]) {
						want++
					}
					if got := plainPrefix(s, from); got != want {
						t.Fatalf("plainPrefix(%q, %d) = %d, want %d", s, from, got, want)
					}
				}
			}
		}
	}
}
