package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// TestLeaderElectionTakeover runs two CCMs against one cluster and cloud,
// kills the leader with SIGKILL while it reconciles load balancers, and
// checks that the other takes over within a lease period and finishes the
// work without creating any load balancer twice: neither the one whose
// create was in flight when the leader died, nor the one the cloud made
// although the leader never learned of it.
func TestLeaderElectionTakeover(t *testing.T) {
	e := setup(t, wasmbuild.Go, simcloud.Options{}, nil,
		"--leader-elect=true",
		"--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=1s",
	)
	a := e.ccm
	const acquired = "Successfully acquired lease"
	eventually(t, 30*time.Second, "the first CCM to lead", func() (bool, error) {
		return a.logContains(acquired), nil
	})
	holderA := e.leaseHolder(t)

	// The second CCM: the same flags but its own port.
	var flags []string
	for _, f := range a.cmd.Args[1:] {
		if !strings.HasPrefix(f, "--secure-port=") {
			flags = append(flags, f)
		}
	}
	b := startCCM(t, e.dir, "ccm-b", flags)
	eventually(t, 30*time.Second, "the second CCM to try for the lease", func() (bool, error) {
		return b.logContains("Attempting to acquire leader lease"), nil
	})

	e.addInstanceAndNode("ha-1", "sim-1a", "10.244.50.0/24")
	e.addInstanceAndNode("ha-2", "sim-1b", "10.244.51.0/24")
	e.waitInitialized(t, "ha-1")
	e.waitInitialized(t, "ha-2")
	if b.logContains(acquired) || e.leaseHolder(t) != holderA {
		t.Fatalf("the lease moved to the second CCM while the first was alive (holder %s)", e.leaseHolder(t))
	}
	c0 := e.cloud.Counters()

	// ha-committed: the cloud creates the load balancer but the leader
	// gets 503 with Retry-After: 60, so it will not look again soon.
	e.setFault(t, simcloud.Fault{Name: "lost", Route: "POST /v1/loadbalancers", FailNext: 1, AfterCommit: true, Status: 503, RetryAfter: 60})
	committed := e.createLBService(t, "ha-committed")
	eventually(t, 30*time.Second, "the lost create to take effect", func() (bool, error) {
		return e.cloud.Counters().Status("POST /v1/loadbalancers", 503) == 1, nil
	})
	if _, ok := e.cloud.LoadBalancer(lbName(committed)); !ok {
		t.Fatal("the create whose response was lost did not take effect")
	}
	e.cloud.ClearFault("lost")

	// ha-inflight: the create is held by the cloud when the leader dies,
	// and the cloud goes on to carry it out as a real one may: whether it
	// lands before the new leader looks or after (then as a conflict),
	// there must be one load balancer.
	injected := e.cloud.Counters().FaultsInjected
	e.setFault(t, simcloud.Fault{Name: "held", Route: "POST /v1/loadbalancers", FailNext: 1, Latency: 8 * time.Second, AfterCommit: true, Status: 503})
	e.createLBService(t, "ha-inflight")
	eventually(t, 30*time.Second, "the create to be in flight", func() (bool, error) {
		return e.cloud.Counters().FaultsInjected > injected, nil
	})
	held := time.Now()
	time.Sleep(200 * time.Millisecond)
	if svc, err := e.getService("ha-committed"); err != nil || len(svc.Status.LoadBalancer.Ingress) > 0 {
		t.Fatalf("ha-committed must still wait for its retry when the leader dies: %v %v", svc.Status.LoadBalancer.Ingress, err)
	}

	killed := time.Now()
	a.kill()
	e.cloud.ClearFaults() // the held request has its delay already
	var holderB string
	for holderB = holderA; holderB == holderA; holderB = e.leaseHolder(t) {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no takeover 30s after the leader was killed (holder %s)", holderA)
		}
		time.Sleep(100 * time.Millisecond)
	}
	takeover := time.Since(killed)
	if holderB == "" {
		t.Fatal("the lease has no holder after the takeover")
	}
	eventually(t, 10*time.Second, "the second CCM to report the lease", func() (bool, error) {
		return b.logContains(acquired), nil
	})

	services := []string{"ha-committed", "ha-inflight"}
	for _, name := range services {
		e.waitIngress(t, name, 60*time.Second)
	}
	// Count once the held create has run its course.
	time.Sleep(time.Until(held.Add(9 * time.Second)))
	e.waitConverged(t, services, 30*time.Second)
	c := e.cloud.Counters()
	created, deleted := c.LoadBalancersCreated-c0.LoadBalancersCreated, c.LoadBalancersDeleted-c0.LoadBalancersDeleted
	if created != len(services) || deleted != 0 || len(e.cloud.LoadBalancers()) != len(services) {
		t.Fatalf("load balancers: %d created and %d deleted for %d Services; the cloud has %d",
			created, deleted, len(services), len(e.cloud.LoadBalancers()))
	}
	b.waitHealthy(t)
	// The lease runs out 4s after the last renewal the second CCM saw, and
	// it tries every 1s-2.2s (retry period with jitter).
	if takeover > 12*time.Second {
		t.Errorf("takeover took %s with a 4s lease and a 1s retry period", takeover)
	}
	t.Logf("leader %s killed mid-create; %s took over after %s; %d load balancers created for %d Services, %d deleted, %d duplicated "+
		"(creates answered 409: %d; the dead leader's held create ran to the end: %v)",
		shortID(holderA), shortID(holderB), takeover.Round(100*time.Millisecond), created, len(services), deleted, created-len(services),
		c.Status("POST /v1/loadbalancers", 409)-c0.Status("POST /v1/loadbalancers", 409),
		c.Status("POST /v1/loadbalancers", 503)-c0.Status("POST /v1/loadbalancers", 503) == 2)
}

// leaseHolder returns the holder of the CCM's leader election lease, ""
// when there is none yet.
func (e *env) leaseHolder(t *testing.T) string {
	t.Helper()
	lease, err := e.client.CoordinationV1().Leases("kube-system").Get(context.Background(), "cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader election lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// shortID shortens a "hostname_uuid" identity to the uuid's first block.
func shortID(id string) string {
	if i := strings.LastIndexByte(id, '_'); i >= 0 {
		id = id[i+1:]
	}
	if i := strings.IndexByte(id, '-'); i >= 0 {
		id = id[:i]
	}
	return fmt.Sprintf("%q", id)
}
