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
	binDir := DefaultBinDir()
	if err := CheckBinaries(binDir); err != nil {
		if os.Getenv("WASMCCM_E2E") == "" {
			t.Skipf("skipping end-to-end test (set WASMCCM_E2E=1 to make this a failure): %v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, Options{BinDir: binDir})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}
