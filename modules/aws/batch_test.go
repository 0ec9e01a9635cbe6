package aws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/sharedstate"
)

// instanceHost is one module instance's host for the batching tests: HTTP
// through the native host, the shared state in a store all instances
// share, with the wasm host's claims (a claim makes the others wait, and
// ends with the instance's call).
type instanceHost struct {
	*native.Host
	store  *sharedstate.Store
	claims sharedstate.Holder
}

func (h *instanceHost) StateGet(key string, maxAge time.Duration, claim bool) ([]byte, bool) {
	v, errno := h.store.Get(context.Background(), &h.claims, []byte(key), maxAge, claim)
	return v, errno == 0
}

func (h *instanceHost) StateSet(key string, value []byte) error {
	if errno := h.store.Set(key, value); errno != 0 {
		return abi.Errno(errno)
	}
	return nil
}

func (h *instanceHost) StateDelete(key string) { h.store.Delete(key) }

// pool is a module's pool of instances, each its own Provider, as in the
// host: a call takes a free instance and ends by releasing its claims.
type pool struct {
	free chan *Provider
}

func newPool(t *testing.T, cloud *awsfake.Cloud, size int) *pool {
	t.Helper()
	handler := cloud.Handler()
	// A cloud's round trip, during which other calls arrive.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	store := sharedstate.New("aws-test", 1<<20)
	pl := &pool{free: make(chan *Provider, size)}
	for range size {
		p := New(&instanceHost{Host: sigV4Host(t, srv.URL, awsfake.DefaultSecretAccessKey), store: store})
		if err := p.Init(context.Background(), cluster, []byte(`{"region": "us-east-1", "clusterID": "c1", "ec2Endpoint": "`+srv.URL+`"}`)); err != nil {
			t.Fatal(err)
		}
		pl.free <- p
	}
	return pl
}

func (pl *pool) call(fn func(p *Provider)) {
	p := <-pl.free
	defer func() {
		h := p.host.(*instanceHost)
		h.store.ReleaseClaims(&h.claims)
		pl.free <- p
	}()
	fn(p)
}

// addNodes adds n running instances and returns their Nodes, named by
// provider ID and labelled with the zone ID (so no zone lookup).
func addNodes(t *testing.T, cloud *awsfake.Cloud, n int) []*abi.Node {
	t.Helper()
	var nodes []*abi.Node
	for range n {
		in, err := cloud.AddInstance(awsfake.Instance{Tags: clusterTags})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &abi.Node{Name: in.PrivateDNSName, ProviderID: "aws:///" + in.Zone + "/" + in.ID,
			Labels: map[string]string{ZoneIDLabel: "z"}})
	}
	return nodes
}

// concurrently runs call for every Node times times at once through pl.
func (pl *pool) concurrently(nodes []*abi.Node, times int, call func(p *Provider, n *abi.Node)) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		for range times {
			wg.Go(func() { pl.call(func(p *Provider) { call(p, n) }) })
		}
	}
	wg.Wait()
}

// TestDescribeBatching: concurrent lookups by provider ID through a pool
// of instances share DescribeInstances requests, and every call gets its
// own instance's answer.
func TestDescribeBatching(t *testing.T) {
	cloud := awsfake.New(awsfake.Options{})
	nodes := addNodes(t, cloud, 40)
	newPool(t, cloud, 8).concurrently(nodes, 3, func(p *Provider, n *abi.Node) {
		md, err := p.InstanceMetadata(context.Background(), n)
		if err != nil || md.ProviderID != n.ProviderID || md.NodeAddresses[0].Address == "" {
			t.Errorf("%s: %+v, %v", n.Name, md, err)
		}
	})
	sent := cloud.Requests()["ec2:DescribeInstances"]
	t.Logf("%d calls, %d DescribeInstances", 3*len(nodes), sent)
	if sent >= len(nodes) {
		t.Errorf("%d DescribeInstances for %d calls about %d instances: not batched", sent, 3*len(nodes), len(nodes))
	}
}

// TestBatchWithUnknownID: EC2 fails a whole request for one unknown ID.
// Then every call of the batch asks alone, so the unknown instance is
// gone on the API's answer about its own ID, and the others exist.
func TestBatchWithUnknownID(t *testing.T) {
	cloud := awsfake.New(awsfake.Options{})
	nodes := addNodes(t, cloud, 15)
	unknown := &abi.Node{Name: "ip-10-9-9-9.ec2.internal", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}
	nodes = append(nodes, unknown)
	newPool(t, cloud, 8).concurrently(nodes, 2, func(p *Provider, n *abi.Node) {
		exists, err := p.InstanceExists(context.Background(), n)
		if err != nil || exists != (n != unknown) {
			t.Errorf("InstanceExists(%s) = %v, %v", n.Name, exists, err)
		}
	})
}

// TestBatchThrottled: a throttled batch is a RetryAfter for every call in
// it, without each asking again alone.
func TestBatchThrottled(t *testing.T) {
	cloud := awsfake.New(awsfake.Options{})
	nodes := addNodes(t, cloud, 16)
	if _, err := cloud.Faults.Add(faultinject.Fault{Route: "ec2:DescribeInstances", Always: true, Status: 429, RetryAfter: 2}); err != nil {
		t.Fatal(err)
	}
	newPool(t, cloud, 8).concurrently(nodes, 1, func(p *Provider, n *abi.Node) {
		_, err := p.InstanceExists(context.Background(), n)
		if o := sdk.OutcomeOf(err); o.Status != abi.StatusRetryAfter || o.RetryAfter != 2*time.Second {
			t.Errorf("InstanceExists(%s): %v, want a RetryAfter of 2s", n.Name, err)
		}
	})
	if sent := cloud.Requests()["ec2:DescribeInstances"]; sent >= len(nodes) {
		t.Errorf("%d DescribeInstances for %d throttled calls: the batch's calls asked again", sent, len(nodes))
	}
}
