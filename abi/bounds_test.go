package abi

import (
	"runtime"
	"testing"
)

// TestListCountBoundedByElementSize: a list whose count the input could
// only back at one byte per element is refused before its slice is
// allocated, for every list type a host decodes from a guest.
func TestListCountBoundedByElementSize(t *testing.T) {
	const size = 4 << 20
	cases := []struct {
		name string
		msg  Message
		// before is what precedes the list: an HTTPRequest's empty
		// method and URL.
		before []byte
	}{
		{"OwnedLoadBalancers", new(OwnedLoadBalancers), nil},
		{"Routes", new(Routes), nil},
		{"NodeAddresses", new(NodeAddresses), nil},
		{"HTTPRequest headers", new(HTTPRequest), []byte{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := append(tc.before, 0xff, 0xff, 0xff, 0x01) // a count of 4 Mi - 1
			msg = append(msg, make([]byte, size)...)
			var err error
			grown := leastAllocated(func() { err = Unmarshal(msg, tc.msg) })
			if err == nil {
				t.Fatal("a list count the input cannot back was accepted")
			}
			if grown > size {
				t.Fatalf("decoding a %d-byte message allocated %d bytes", len(msg), grown)
			}
		})
	}
}

// TestRequestHeadersBounded: an HTTPRequest of more than MaxRequestHeaders
// headers, each of which would fit its bytes, is refused before the list
// is allocated; one of exactly MaxRequestHeaders decodes.
func TestRequestHeadersBounded(t *testing.T) {
	for _, tc := range []struct {
		headers int
		ok      bool
	}{{MaxRequestHeaders, true}, {MaxRequestHeaders + 1, false}, {1 << 19, false}} {
		req := &HTTPRequest{Method: "GET", URL: "https://api.example", Headers: make([]Header, tc.headers)}
		msg := Marshal(nil, req)
		var err error
		grown := leastAllocated(func() { err = Unmarshal(msg, new(HTTPRequest)) })
		if (err == nil) != tc.ok {
			t.Errorf("%d headers: err = %v, want ok %v", tc.headers, err, tc.ok)
		}
		if !tc.ok && grown > 1<<10 {
			t.Errorf("%d headers: refusing the request allocated %d bytes", tc.headers, grown)
		}
	}
}

// leastAllocated runs f a few times and returns the fewest bytes the
// process allocated during one run. The counter is process-wide, so one
// run can also count what the test framework or the runtime allocated
// meanwhile; the least of several runs is what f itself cannot avoid.
func leastAllocated(f func()) uint64 {
	const runs = 5
	least := ^uint64(0)
	for range runs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}
