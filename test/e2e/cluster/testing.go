package cluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// startTimeout bounds StartForTest. A cold start takes about two seconds;
// the margin absorbs a loaded CI machine.
const startTimeout = 60 * time.Second

// StartForTest starts a cluster that is stopped when t ends.
//
// Without the binaries it skips t, unless WASMCCM_E2E is set: CI sets it so
// that a missing install step fails the run instead of silently skipping
// every end-to-end test. With the binaries present the test always runs.
func StartForTest(t testing.TB) *Cluster {
	t.Helper()
	return startForTest(t, Options{}, startTimeout)
}

// nodesStartTimeout bounds StartWithNodesForTest: building the pause
// image, starting containerd and the kubelet's registration take seconds
// more than the API server alone.
const nodesStartTimeout = 3 * time.Minute

// StartWithNodesForTest starts a cluster with Nodes (see NodeOptions) that
// is stopped, containers and mounts included, when t ends, whether t
// passes or not. Without the binaries, containerd or root it skips t,
// unless WASMCCM_E2E is set, as for StartForTest.
func StartWithNodesForTest(t testing.TB, nodes NodeOptions) *Cluster {
	t.Helper()
	if nodes.BinDir == "" {
		nodes.BinDir = DefaultNodeBinDir()
	}
	if err := CheckNodeBinaries(nodes.BinDir); err != nil {
		skipOrFail(t, err)
	}
	return startForTest(t, Options{Nodes: &nodes}, nodesStartTimeout)
}

func startForTest(t testing.TB, opts Options, timeout time.Duration) *Cluster {
	t.Helper()
	opts.BinDir = DefaultBinDir()
	if err := CheckBinaries(opts.BinDir); err != nil {
		skipOrFail(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
		// Checked whether the test passed or failed: a failing run must
		// not leave the machine dirty either.
		if err := c.Leftovers(); err != nil {
			t.Errorf("after the stop: %v", err)
		}
	})
	return c
}

// StartContainerdForTest starts a Containerd in a temporary directory and
// stops it when t ends. Without root or the tools it skips t, unless
// WASMCCM_E2E is set, as for StartForTest.
func StartContainerdForTest(t testing.TB, opts ContainerdOptions) *Containerd {
	t.Helper()
	if err := CheckContainerd(); err != nil {
		skipOrFail(t, err)
	}
	dir, err := os.MkdirTemp("", "wasmccm-e2e-containerd-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := StartContainerd(ctx, dir, opts)
	t.Cleanup(func() {
		if c != nil {
			if err := c.Stop(); err != nil {
				t.Errorf("stop containerd: %v", err)
			}
		}
		if err := removeUnmounted(dir); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// skipOrFail skips t for want of err's dependency, or fails it under
// WASMCCM_E2E: CI sets it so that a missing install step fails the run
// instead of silently skipping every end-to-end test.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("WASMCCM_E2E") == "" {
		t.Skipf("skipping end-to-end test (set WASMCCM_E2E=1 to make this a failure): %v", err)
	}
	t.Fatal(err)
}
