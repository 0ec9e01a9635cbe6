package simcloud

import (
	"reflect"
	"testing"
)

// TestSnapshotEntryRoundTrips: an instance decodes from its snapshot entry
// as it was listed, and a damaged entry is an error, not a partial
// instance.
func TestSnapshotEntryRoundTrips(t *testing.T) {
	in := instance{ID: "i-0042", Name: "node-0042", Zone: "sim-1b", Region: "sim-1", Type: "sim.medium", State: "running",
		Addresses: []address{{Type: "InternalIP", Address: "10.0.0.43"}, {Type: "Hostname", Address: "node-0042"}},
		Labels:    map[string]string{"simcloud.example/pool": "default"}}
	raw := appendInstance(nil, &in)
	got, err := cachedInstance(raw, nil)
	if err != nil || !reflect.DeepEqual(*got, in) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, in)
	}
	if _, err := cachedInstance(raw[:len(raw)-1], nil); err == nil {
		t.Error("a truncated entry decoded")
	}
}
