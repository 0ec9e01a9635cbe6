package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// TestAWSDescribeCoalescing counts the DescribeInstances requests of one
// pass of the controllers over 20 and over 200 Nodes, as the TinyGo module
// with a pool of 8 instances and a 20 ms round trip to the cloud: for
// each Node, InstanceExists, InstanceShutdown and InstanceMetadata at
// once, all Nodes together. The module batches the instance IDs of
// concurrent lookups into one request (and marks Describe actions
// read-only, ABI revision 5, so the host coalesces identical ones in
// flight): fewer requests than Nodes, where each call asking alone would
// send one per call.
func TestAWSDescribeCoalescing(t *testing.T) {
	for _, nodes := range []int{20, 200} {
		t.Run(strconv.Itoa(nodes), func(t *testing.T) { describePass(t, nodes) })
	}
}

func describePass(t *testing.T, awsNodes int) {
	ctx := context.Background()
	e := newCloudEnvN(t, simcloud.Global{}, 0)
	fake := awsfake.New(awsfake.Options{})
	var nodes []*abi.Node
	for range awsNodes {
		in, err := fake.AddInstance(awsfake.Instance{Tags: map[string]string{"kubernetes.io/cluster/bench": "owned"}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &abi.Node{Name: in.PrivateDNSName, ProviderID: "aws:///" + in.Zone + "/" + in.ID, Labels: map[string]string{"topology.k8s.aws/zone-id": "z"}})
	}
	// A cloud's round trip, during which identical requests overlap.
	slow := fake.Handler()
	e.transport = handlerTransport{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		slow.ServeHTTP(w, r)
	})}
	cfg := e.cachedConfig("aws-coalesce")
	cfg.ProviderConfig = awsConfig
	cfg.HTTP = egress.Config{AllowedOrigins: []string{awsEndpoint}, Transport: e.transport}
	cfg.Credentials = e.awsCredentials(t)
	cfg.PoolSize = 8
	m, err := host.New(ctx, moduleWasm(t, awsModule, wasmbuild.TinyGo), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	before, start := fake.Requests()["ec2:DescribeInstances"], time.Now()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			var b abi.Bool
			if err := m.Call(ctx, abi.ExportInstanceExists, n, &b); err != nil || !b {
				t.Errorf("InstanceExists %s: %v %v", n.Name, b, err)
			}
		})
		wg.Go(func() {
			var b abi.Bool
			if err := m.Call(ctx, abi.ExportInstanceShutdown, n, &b); err != nil {
				t.Errorf("InstanceShutdown %s: %v", n.Name, err)
			}
		})
		wg.Go(func() {
			if err := (wasmTarget{m}).instanceMetadata(ctx, n); err != nil {
				t.Errorf("InstanceMetadata %s: %v", n.Name, err)
			}
		})
	}
	wg.Wait()
	sent := fake.Requests()["ec2:DescribeInstances"] - before
	t.Logf("%d Nodes, %d calls: %d DescribeInstances requests in %v", awsNodes, 3*awsNodes, sent, time.Since(start).Round(time.Millisecond))
	if sent >= awsNodes {
		t.Errorf("%d DescribeInstances requests for %d calls about %d instances: not batched", sent, 3*awsNodes, awsNodes)
	}
}
