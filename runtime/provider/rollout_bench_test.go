package provider

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkShadowCost measures what a shadow rollout costs per read-only
// call: the cloud requests it adds (cloud-requests/op, counted by the
// simulated cloud), the calls it had to drop because the shadow
// concurrency was full (dropped/op), and the time on the caller's path
// (ns/op), against the same calls with no rollout in progress. The call is
// InstanceMetadata, which the node controller makes for every Node at
// every status refresh.
func BenchmarkShadowCost(b *testing.B) {
	for _, tc := range []struct {
		name   string
		shadow bool
		// pace spaces the calls, as controllers do; 0 is back to back.
		pace time.Duration
	}{
		{"no-rollout", false, 0},
		{"shadow", true, 0},
		{"shadow-paced-5ms", true, 5 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newRolloutEnv(b, 1, RolloutConfig{Shadow: ShadowConfig{Duration: metav1.Duration{Duration: time.Hour}}})
			if tc.shadow {
				e.replace(b, "relabel")
			}
			i, _ := e.c.InstancesV2()
			ctx := context.Background()
			before := requests(e)
			for b.Loop() {
				if _, err := i.InstanceMetadata(ctx, e.nodes[0]); err != nil {
					b.Fatal(err)
				}
				if tc.pace > 0 {
					time.Sleep(tc.pace)
				}
			}
			var dropped int
			if r := e.c.rollout.Load(); r != nil {
				// Let the shadow calls in flight finish before counting.
				for len(r.sem) > 0 {
					time.Sleep(time.Millisecond)
				}
				dropped = statsOf(r).Dropped
			}
			b.ReportMetric(float64(requests(e)-before)/float64(b.N), "cloud-requests/op")
			b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
		})
	}
}

func requests(e *rolloutEnv) int {
	n := 0
	for _, c := range e.cloud.Counters().Requests {
		n += c
	}
	return n
}
