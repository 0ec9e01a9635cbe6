package hcloud

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
)

// TestServerSnapshot: lookups come from one listing; a server the listing
// lacks is read directly, and only that read's not_found makes it gone.
func TestServerSnapshot(t *testing.T) {
	e := newEnv(t, `{"network": "k8s", "serverCacheMaxAge": "1h"}`, hcloudfake.Options{})
	ctx := context.Background()
	reads := func() (list, byID int) {
		r := e.cloud.Requests()
		return r["GET /v1/servers"], r["GET /v1/servers/{id}"]
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := e.p.InstanceMetadata(ctx, e.node(name)); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.p.InstanceExists(ctx, &abi.Node{Name: name}); !ok || err != nil {
			t.Fatalf("%s by name: %v, %v", name, ok, err)
		}
	}
	if list, byID := reads(); list != 1 || byID != 0 {
		t.Errorf("six lookups made %d listings and %d reads by ID, want 1 and 0", list, byID)
	}

	// Created after the listing: found by a direct read.
	d, err := e.cloud.AddServer(hcloudfake.Server{Name: "d", Network: e.network.ID})
	if err != nil {
		t.Fatal(err)
	}
	e.servers["d"] = d
	if ok, err := e.p.InstanceExists(ctx, e.node("d")); !ok || err != nil {
		t.Errorf("a server created after the listing: %v, %v", ok, err)
	}
	if _, byID := reads(); byID != 1 {
		t.Errorf("%d reads by ID, want 1", byID)
	}

	// Deleted after the listing: the snapshot still holds it, which says
	// it exists (nothing is deleted on a stale answer).
	e.cloud.DeleteServer(e.servers["b"].ID)
	if ok, err := e.p.InstanceExists(ctx, e.node("b")); !ok || err != nil {
		t.Errorf("deleted server from a snapshot that still lists it: %v, %v", ok, err)
	}
	// A fresh listing lacks it: the direct read confirms, then it is gone.
	e.p.servers.Invalidate()
	if ok, err := e.p.InstanceExists(ctx, e.node("b")); ok || err != nil {
		t.Errorf("deleted server: %v, %v; want false", ok, err)
	}
	if list, byID := reads(); list != 2 || byID != 2 {
		t.Errorf("%d listings and %d reads by ID, want 2 and 2 (the confirmation)", list, byID)
	}
}

// TestServerSnapshotOff: "off" sends every lookup to the API, as the
// official CCM's HCLOUD_SERVER_CACHE_MODE=off does.
func TestServerSnapshotOff(t *testing.T) {
	e := newEnv(t, `{"network": "k8s", "serverCacheMaxAge": "off"}`, hcloudfake.Options{})
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := e.p.InstanceMetadata(ctx, e.node(name)); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.p.InstanceExists(ctx, &abi.Node{Name: name}); !ok || err != nil {
			t.Fatalf("%s by name: %v, %v", name, ok, err)
		}
	}
	r := e.cloud.Requests()
	if r["GET /v1/servers/{id}"] != 2 || r["GET /v1/servers"] != 2 {
		t.Errorf("requests %v: want 2 reads by ID and 2 searches by name", r)
	}
}

// TestServerListingFailures: a listing that fails or ends short makes no
// server look gone.
func TestServerListingFailures(t *testing.T) {
	t.Run("error on the second page", func(t *testing.T) {
		e := newEnv(t, `{}`, hcloudfake.Options{})
		for i := range 60 { // two pages of 50
			if _, err := e.cloud.AddServer(hcloudfake.Server{Name: "extra-" + strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.cloud.Faults.Add(faultinject.Fault{Name: "page2", Method: "GET", PathPrefix: "/v1/servers", Query: "page=2", Always: true, Status: 500}); err != nil {
			t.Fatal(err)
		}
		e.cloud.DeleteServer(e.servers["b"].ID)
		if ok, err := e.p.InstanceExists(context.Background(), e.node("b")); err == nil {
			t.Errorf("InstanceExists = %v with a failed listing, want an error", ok)
		}
	})
	t.Run("announced more than it listed", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasPrefix(r.URL.Path, "/v1/servers/") {
				w.Write([]byte(`{"server": {"id": 2, "name": "b", "status": "running"}}`))
				return
			}
			// Page 1 of 2 without its next page: server 2 is not listed.
			w.Write([]byte(`{"servers": [{"id": 1, "name": "a", "status": "running"}],
				"meta": {"pagination": {"page": 1, "per_page": 50, "next_page": null, "last_page": 2, "total_entries": 2}}}`))
		}))
		defer srv.Close()
		p := New(&native.Host{})
		if err := p.Init(context.Background(), "test", []byte(`{"endpoint": "`+srv.URL+`/v1", "tokenCredential": ""}`)); err != nil {
			t.Fatal(err)
		}
		ok, err := p.InstanceExists(context.Background(), &abi.Node{Name: "b", ProviderID: "hcloud://2"})
		if err == nil || !strings.Contains(err.Error(), "incomplete") {
			t.Errorf("InstanceExists = %v, %v; want an error about the incomplete listing", ok, err)
		}
	})
}

// TestRouteListingSnapshotAge: ListRoutes maps gateways from a snapshot up
// to a minute old, so the route controller's 10 s period does not list
// every server each time, while instance lookups keep serverCacheMaxAge.
func TestRouteListingSnapshotAge(t *testing.T) {
	e := newEnv(t, `{"network": "k8s", "serverCacheMaxAge": "1ms"}`, hcloudfake.Options{ActionPolls: 1})
	ctx := context.Background()
	a := e.servers["a"]
	if err := e.p.CreateRoute(ctx, "test", "", &abi.Route{TargetNode: "a", DestinationCIDR: "10.244.0.0/24",
		TargetNodeAddresses: []abi.NodeAddress{{Type: "InternalIP", Address: a.PrivateNet[0].IP}}}); err != nil {
		t.Fatal(err)
	}
	listings := func() int { return e.cloud.Requests()["GET /v1/servers"] }
	before := listings()
	for range 3 {
		time.Sleep(5 * time.Millisecond) // older than serverCacheMaxAge
		got, err := e.p.ListRoutes(ctx, "test")
		if err != nil || len(got) != 1 || got[0].TargetNode != "a" {
			t.Fatalf("ListRoutes = %+v, %v", got, err)
		}
	}
	if n := listings() - before; n != 0 {
		t.Errorf("three route listings made %d server listings, want 0 (the route's snapshot is less than a minute old)", n)
	}
	if _, err := e.p.InstanceMetadata(ctx, e.node("a")); err != nil {
		t.Fatal(err)
	}
	if n := listings() - before; n != 1 {
		t.Errorf("an instance lookup past serverCacheMaxAge made %d listings, want 1", n)
	}
}

// TestServerListingResumes: a listing that fails on its second page (a
// throttled call, say) resumes there at the next lookup, so the first
// page is not read, nor the cloud's quota spent, twice.
func TestServerListingResumes(t *testing.T) {
	e := newEnv(t, `{"network": "k8s"}`, hcloudfake.Options{})
	for i := range 60 { // two pages of 50
		if _, err := e.cloud.AddServer(hcloudfake.Server{Name: "extra-" + strconv.Itoa(i), Network: e.network.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cloud.Faults.Add(faultinject.Fault{Name: "page2", Method: "GET", PathPrefix: "/v1/servers", Query: "page=2", FailNext: 1, Status: 429, RetryAfter: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.p.InstanceMetadata(ctx, e.node("a")); err == nil {
		t.Fatal("a lookup answered from a listing that failed on page 2")
	}
	if _, err := e.p.InstanceMetadata(ctx, e.node("a")); err != nil {
		t.Fatal(err)
	}
	// The fake counts what its fault injector let through: page 1 once
	// and page 2 once; without resuming, page 1 twice.
	if n := e.cloud.Requests()["GET /v1/servers"]; n != 2 {
		t.Errorf("%d page requests served, want 2", n)
	}
	byIP, err := e.p.gateways(ctx, time.Hour)
	if err != nil || len(byIP) != 63 {
		t.Errorf("gateways of the resumed listing: %d, %v; want 63", len(byIP), err)
	}
}

// TestSnapshotEntryRoundTrips: a server decodes from its snapshot entry as
// it was listed, and a damaged entry is an error, not a partial server.
func TestSnapshotEntryRoundTrips(t *testing.T) {
	s := server{ID: 42, Name: "node-0042", Status: "running",
		PrivateNet: []privateNet{{Network: 7, IP: "10.0.0.43"}, {Network: 8, IP: "10.1.0.43"}}}
	s.PublicNet.IPv4 = &publicIP{IP: "198.51.100.43"}
	s.ServerType.Name, s.Location.Name = "cx22", "fsn1"
	raw := appendServer(nil, &s)
	got, err := decodeServer(raw)
	if err != nil || !reflect.DeepEqual(*got, s) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, s)
	}
	if _, err := decodeServer(raw[:len(raw)-1]); err == nil {
		t.Error("a truncated entry decoded")
	}
}
