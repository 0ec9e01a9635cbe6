package lifecycle

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The rollout tests run the first-party simcloud module against an
// in-process simulated cloud, and replace it with the variants the
// end-to-end suite uses (test/e2e/testdata).

var fastShadow = cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Duration: cloudconfig.Duration{Duration: 50 * time.Millisecond}, Calls: 6}}

// TestShadowRejectsDestructiveCandidate: the candidate answers "gone" for
// every Node. There is no controller traffic (every Node is Ready), so the
// probe at the end of the shadow period finds it; it is rejected, the old
// module stays, and the same file is not tried again.
func TestShadowRejectsDestructiveCandidate(t *testing.T) {
	e := newEnv(t, 3, fastShadow)
	bad := e.replace(t, "allgone")
	if e.m.candidate() != bad || e.m.served.Digest != e.digest {
		t.Fatalf("candidate %q, loaded %q: the new module must be in shadow, not in service", e.m.candidate(), e.m.served.Digest)
	}
	shadow := e.m.rollout.Load()
	e.poll(t, "rejection", func() bool { return e.m.rollout.Load() == nil })
	seen := statsOf(shadow)
	if e.m.served.Digest != e.digest || e.m.refused.digest != bad {
		t.Fatalf("loaded %q rejected %q; want the old module in service and the new one refused", e.m.served.Digest, e.m.refused)
	}
	if seen.ByVerdict[decision.Destructive] == 0 || len(seen.First) == 0 || seen.First[0].Export != "instance_exists" {
		t.Fatalf("comparison %s, first %v: want destructive InstanceExists disagreements", seen, seen.First)
	}
	t.Logf("rejected after %s; first disagreement: %s", seen, seen.First[0])
	e.existsAll(t)
	e.m.Reload(context.Background())
	if e.m.rollout.Load() != nil {
		t.Fatal("the rejected file was taken into shadow again")
	}
}

// TestShadowPromotesBenignChange: the candidate adds a label. Controller
// traffic is compared, only benign differences appear, and after the
// shadow period the candidate is promoted and answers with the label.
func TestShadowPromotesBenignChange(t *testing.T) {
	e := newEnv(t, 3, fastShadow)
	next := e.replace(t, "relabel")
	for range 2 {
		e.existsAll(t)
		for _, n := range e.nodes {
			labels, err := e.labels(n)
			if err != nil || labels["simcloud.example/generation"] != "" {
				t.Fatalf("in shadow, InstanceMetadata labels = %v, %v: the old module must answer", labels, err)
			}
		}
	}
	shadow := e.m.rollout.Load()
	e.poll(t, "promotion", func() bool { return e.m.served.Digest == next })
	seen := statsOf(shadow)
	if seen.ByVerdict[decision.Destructive] != 0 || seen.ByVerdict[decision.Benign] == 0 || seen.ByVerdict[decision.Agree] == 0 {
		t.Fatalf("comparison %s: want agreements and benign differences only", seen)
	}
	labels, err := e.labels(e.nodes[0])
	if err != nil || labels["simcloud.example/generation"] != "2" {
		t.Fatalf("after promotion, InstanceMetadata labels = %v, %v", labels, err)
	}
	if r := e.m.rollout.Load(); r == nil || r.phase != decision.Probation {
		t.Fatal("the previous module must be kept for the rollback window")
	}
	t.Logf("promoted after %s", seen)
}

// TestRollbackOnTraps: shadowing off, the new module is promoted at once;
// it traps on every call about a marked Node, so the host puts the
// previous module back, which answers those calls, and refuses the file.
func TestRollbackOnTraps(t *testing.T) {
	e := newEnv(t, 2, cloudconfig.Rollout{
		Shadow:   cloudconfig.Shadow{Disabled: true},
		Rollback: cloudconfig.Rollback{MinCalls: 4, FailurePercent: 50},
	})
	bad := e.replace(t, "trapmarked")
	if e.m.served.Digest != bad {
		t.Fatal("with shadowing disabled the new module must be in service at once")
	}
	if r := e.m.rollout.Load(); r == nil || r.file.Wasm != nil || e.m.served.Wasm != nil {
		t.Fatal("in probation, the Manager must keep neither module's decompressed bytes")
	}
	marked := e.nodes[0].DeepCopy()
	marked.Labels = map[string]string{"e2e.wasmccm.io/trap": "true"}
	for range 4 {
		if ok, err := e.exists(marked); ok || err == nil {
			t.Fatalf("trapping call answered %v, %v; want an error", ok, err)
		}
	}
	e.m.advanceRollout(context.Background())
	if e.m.served.Digest != e.digest || e.m.refused.digest != bad || e.m.rollout.Load() != nil {
		t.Fatalf("loaded %q rejected %q: want a rollback to %q", e.m.served.Digest, e.m.refused, e.digest)
	}
	if ok, err := e.exists(marked); !ok || err != nil {
		t.Fatalf("after rollback InstanceExists = %v, %v", ok, err)
	}
	e.m.Reload(context.Background())
	if e.m.served.Digest != e.digest || e.m.rollout.Load() != nil {
		t.Fatal("the rolled-back file was taken again")
	}
}

// TestRejectionCoversSignature: a module file whose signature has not
// arrived yet is rejected once, not at every poll, and checked again when
// the signature arrives, although the module file did not change.
func TestRejectionCoversSignature(t *testing.T) {
	publicKey, signature := lifecycletest.Signer(t)
	dir := t.TempDir()
	pubPath, sigPath := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "provider.wasm.sig")
	lifecycletest.WriteFile(t, pubPath, publicKey)
	sign := func(b []byte) { lifecycletest.WriteFile(t, sigPath, signature(b)) }
	wasm := lifecycletest.Guest(t, "testprovider")
	sign(wasm)
	tm := newTestModule(t, wasm, lifecycletest.Grants{})
	tm.opts.Trust = modulefile.Trust{PublicKeyPath: pubPath, SignaturePath: sigPath}
	tm.opts.Rollout = cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Disabled: true}}
	m, err := tm.start(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The new module (the same code, gzipped) lands before its signature.
	next := lifecycletest.Gzip(t, wasm)
	lifecycletest.WriteFile(t, tm.path, next)
	nextDigest := lifecycletest.Digest(next)
	rejections := func() float64 {
		v, _ := testutil.GetCounterMetricValue(reloads.WithLabelValues(tm.opts.Name, "rejected"))
		return v
	}
	before := rejections()
	for range 3 {
		m.Reload(ctx)
	}
	if got := rejections() - before; got != 1 || m.served.Digest == nextDigest {
		t.Fatalf("%v rejections over three polls, loaded %s; want one rejection and the old module in service", got, m.served.Digest)
	}
	sign(next)
	m.Reload(ctx)
	if m.served.Digest != nextDigest {
		t.Fatalf("loaded %s after the signature arrived, want %s", m.served.Digest, nextDigest)
	}
}

// TestHotReload swaps the module file repeatedly under continuous calls:
// valid replacements take over with zero failed calls, invalid ones are
// refused and the module in service keeps answering. Shadowing is off, so
// that each replacement takes over at once (the tests above cover it).
func TestHotReload(t *testing.T) {
	wasm := lifecycletest.Guest(t, "testprovider")
	versions := [][]byte{lifecycletest.Gzip(t, wasm), wasm} // same provider, different files
	tm := newTestModule(t, wasm, lifecycletest.Grants{})
	tm.opts.Rollout.Shadow.Disabled = true
	m, err := tm.start(t)
	if err != nil {
		t.Fatal(err)
	}

	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				calls.Add(1)
				var exists abi.Bool
				if err := m.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "present"}, &exists); err != nil || !exists {
					failures.Add(1)
					t.Errorf("call during reload: %v %v", exists, err)
				}
			}
		}()
	}
	ctx := context.Background()
	const swaps = 6
	for n := 0; n < swaps; n++ {
		lifecycletest.WriteFile(t, tm.path, versions[n%2])
		m.Reload(ctx)
		if m.served.Digest != lifecycletest.Digest(versions[n%2]) {
			t.Fatalf("swap %d did not take effect", n)
		}
	}
	before := m.served.Digest
	for _, bad := range []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("not wasm")},
		{"fewer capabilities", lifecycletest.Guest(t, "minimal")},
	} {
		lifecycletest.WriteFile(t, tm.path, bad.data)
		m.Reload(ctx)
		if m.served.Digest != before {
			t.Fatalf("%s module replaced the one in service", bad.name)
		}
	}
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || calls.Load() == 0 {
		t.Fatalf("%d of %d calls failed during %d reloads", failures.Load(), calls.Load(), swaps)
	}
	t.Logf("%d calls, 0 failed, across %d reloads and 2 rejected files", calls.Load(), swaps)
}

// shadowRecorder is a Backend that records what the rollout tells it
// about running in shadow; nothing calls it.
type shadowRecorder struct {
	Backend
	shadow []bool
}

func (s *shadowRecorder) SetShadow(shadow bool)       { s.shadow = append(s.shadow, shadow) }
func (s *shadowRecorder) Info() host.Info             { return host.Info{} }
func (s *shadowRecorder) Close(context.Context) error { return nil }

// TestCandidateYieldsRateBudgetUntilPromoted: a candidate runs in shadow,
// where it gets only the rate budget's spare room, from the start of its
// rollout until its promotion, which makes it a full user of the budget;
// with shadowing disabled it goes straight to service as a full user.
func TestCandidateYieldsRateBudgetUntilPromoted(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		inService := &shadowRecorder{}
		m := Fixed(inService)
		m.opts.Rollout.Shadow.Disabled = disabled
		m.opts.Emit = func(events.Reason, string) {}
		candidate := &shadowRecorder{}
		file := modulefile.File{Digest: "candidate"}
		m.startRollout(candidate, file)
		if !disabled {
			if want := []bool{true}; !slices.Equal(candidate.shadow, want) {
				t.Fatalf("in shadow, the candidate was told %v, want %v", candidate.shadow, want)
			}
			m.promote(candidate, file, "compared")
		}
		if want := []bool{true, false}; !slices.Equal(candidate.shadow, want) {
			t.Errorf("shadow disabled %v: promoted, the candidate was told %v, want %v", disabled, candidate.shadow, want)
		}
		if len(inService.shadow) != 0 {
			t.Errorf("the module in service was told %v; it must keep its place in the budget", inService.shadow)
		}
	}
}

// TestShadowThrottledIsNotAFailure: the module in service and a benign
// candidate share a limited origin. With a burst of 1 the budget never has
// spare room, so every request of the candidate gets the host's 429 and it
// answers RetryAfter: those calls are not compared, neither failures nor
// disagreements, and the candidate is neither rejected nor promoted on no
// evidence; it waits in shadow. With room to spare, the same candidate is
// compared and promoted.
func TestShadowThrottledIsNotAFailure(t *testing.T) {
	limit := func(burst int) func(*testModule) {
		return func(tm *testModule) {
			origins := tm.host.HTTP.AllowedOrigins
			budget, err := egress.NewRateBudget("test", []cloudconfig.RateLimit{{Origin: origins[0], PerSecond: 1000, Burst: burst}}, origins, nil)
			if err != nil {
				t.Fatal(err)
			}
			tm.host.HTTP.Budget = budget
		}
	}

	e := newEnv(t, 3, fastShadow, limit(1))
	next := e.replace(t, "relabel")
	shadow := e.m.rollout.Load()
	for range 2 {
		e.existsAll(t)
	}
	e.poll(t, "the end of the shadow period", func() bool { return e.m.rollout.Load() != shadow || shadow.waitReported })
	seen := statsOf(shadow)
	if e.m.candidate() != next || e.m.served.Digest != e.digest || e.m.refused != (refusal{}) {
		t.Fatalf("candidate %q, in service %q, rejected %q after %s; want the candidate still in shadow",
			e.m.candidate(), e.m.served.Digest, e.m.refused, seen)
	}
	if seen.Compared() != 0 || seen.Throttled == 0 {
		t.Fatalf("comparison %s: want every call of the candidate left out as throttled", seen)
	}
	t.Logf("with burst 1: %s", seen)

	e = newEnv(t, 3, fastShadow, limit(1000))
	next = e.replace(t, "relabel")
	shadow = e.m.rollout.Load()
	for range 2 {
		e.existsAll(t)
	}
	e.poll(t, "promotion", func() bool { return e.m.served.Digest == next })
	if seen := statsOf(shadow); seen.Throttled != 0 || seen.ByVerdict[decision.Agree] == 0 {
		t.Fatalf("comparison %s with room to spare: want agreements and nothing throttled", seen)
	}
}

// throttledBackend is a candidate whose every call the rate budget left
// without room, as host.Module reports it.
type throttledBackend struct{ shadowRecorder }

func (*throttledBackend) Call(_ context.Context, export string, _, _ abi.Message) error {
	return &host.FailureError{Export: export, Reason: host.ReasonShadowThrottled, Err: host.ErrShadowThrottled}
}

// TestThrottledProbeIsNoEvidence: the probe of the Nodes at the end of the
// shadow period counts a Node as probed only if it was compared, so a
// candidate the budget left no room to answer about any Node is not
// promoted on the strength of one call compared elsewhere: that probe is
// what keeps a module calling every Node gone out of service.
func TestThrottledProbeIsNoEvidence(t *testing.T) {
	e := newEnv(t, 3, fastShadow)
	e.m.startRollout(&throttledBackend{}, modulefile.File{Digest: "candidate"})
	r := e.m.rollout.Load()
	r.mu.Lock()
	r.stats.ByVerdict[decision.Agree] = 1
	r.mu.Unlock()
	e.poll(t, "the end of the probe", func() bool { return r.waitReported || e.m.rollout.Load() != r })
	seen := statsOf(r)
	if e.m.rollout.Load() != r || e.m.served.Digest != e.digest {
		t.Fatalf("in service %q after %s: want the candidate still in shadow", e.m.served.Digest, seen)
	}
	if seen.Throttled != len(e.nodes) {
		t.Fatalf("comparison %s: want the %d probe calls left out as throttled", seen, len(e.nodes))
	}
}

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
			e := newEnv(b, 1, cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Duration: cloudconfig.Duration{Duration: time.Hour}}})
			if tc.shadow {
				e.replace(b, "relabel")
			}
			before := requests(e)
			for b.Loop() {
				if _, err := e.labels(e.nodes[0]); err != nil {
					b.Fatal(err)
				}
				if tc.pace > 0 {
					time.Sleep(tc.pace)
				}
			}
			var dropped int
			if r := e.m.rollout.Load(); r != nil {
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
