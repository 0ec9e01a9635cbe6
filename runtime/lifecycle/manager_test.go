package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The Manager's tests run modules as the provider does, with their calls
// made directly rather than through the cloudprovider methods:
// runtime/provider's tests cover those.

// testModule is a module file and what a Manager over it is started
// with; tests change both before start.
type testModule struct {
	path string
	// host is what modules are loaded with: two instances, calls of 2 s
	// and the grants given.
	host   host.Config
	opts   Options
	events eventLog
}

func newTestModule(t testing.TB, wasm []byte, g lifecycletest.Grants) *testModule {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider.wasm")
	lifecycletest.WriteFile(t, path, wasm)
	tm := &testModule{path: path, host: host.Config{
		Name: "test", ClusterName: "kubernetes", PoolSize: 2, CallTimeout: 2 * time.Second,
		CompilationCacheDir: lifecycletest.CompilationCache(),
		ProviderConfig:      g.ProviderConfig, Credentials: g.Credentials,
	}}
	if g.Origin != "" {
		tm.host.HTTP.AllowedOrigins = []string{g.Origin}
	}
	tm.opts = Options{
		Name: "test",
		Path: path, Source: path, Load: tm.load, Emit: tm.events.emit,
		ListNodes: func() []*v1.Node { return nil }, ExistenceQuestion: existenceQuestion,
	}
	return tm
}

func (tm *testModule) load(ctx context.Context, file modulefile.File, shadow bool) (Backend, error) {
	cfg := tm.host
	cfg.HTTP.Shadow = shadow
	return host.New(ctx, file.Wasm, cfg)
}

// start starts a Manager as the provider does, closed when the test ends.
func (tm *testModule) start(t testing.TB) (*Manager, error) {
	t.Helper()
	m, err := Start(context.Background(), tm.opts, nil)
	if err == nil {
		t.Cleanup(func() { m.Close(context.Background()) })
	}
	return m, err
}

// existenceQuestion is InstanceExists about node, as the provider asks it
// of a module with InstancesV2.
func existenceQuestion(node *v1.Node) (string, abi.Message, abi.Message) {
	return abi.ExportInstanceExists, &abi.Node{Name: node.Name, UID: string(node.UID), Labels: node.Labels}, new(abi.Bool)
}

// eventLog keeps the Events a Manager reports.
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

type recordedEvent struct {
	reason  events.Reason
	message string
}

func (l *eventLog) emit(reason events.Reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recordedEvent{reason, message})
}

// messages are the messages of the Events of reason.
func (l *eventLog) messages(reason events.Reason) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e.message)
		}
	}
	return out
}

// env is a Manager serving the simcloud module, with nodes instances in
// the simulated cloud and their Nodes listed as the Node cache would.
type env struct {
	m     *Manager
	tm    *testModule
	cloud *simcloud.Cloud
	nodes []*v1.Node
	// instances maps Node names to instance IDs.
	instances map[string]string
	digest    string
}

// newEnv's mutate, if any, changes the set-up after the grants are in it.
func newEnv(t testing.TB, nodes int, rollout cloudconfig.Rollout, mutate ...func(*testModule)) *env {
	t.Helper()
	cloud, grants := lifecycletest.Simcloud(t)
	wasm, digest := lifecycletest.SimcloudModule(t, "simcloud")
	e := &env{cloud: cloud, instances: map[string]string{}, digest: digest}
	e.tm = newTestModule(t, wasm, grants)
	e.tm.opts.Rollout = rollout
	e.tm.opts.ListNodes = func() []*v1.Node { return e.nodes }
	for _, m := range mutate {
		m(e.tm)
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		in, err := cloud.AddInstance(simcloud.Instance{Name: name, Zone: "sim-1a", Region: "sim-1", State: "running"})
		if err != nil {
			t.Fatal(err)
		}
		e.instances[name] = in.ID
		e.nodes = append(e.nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}})
	}
	var err error
	if e.m, err = e.tm.start(t); err != nil {
		t.Fatal(err)
	}
	return e
}

// replace writes a new module file and runs one poll.
func (e *env) replace(t testing.TB, pkg string) string {
	t.Helper()
	wasm, digest := lifecycletest.SimcloudModule(t, pkg)
	lifecycletest.WriteFile(t, e.tm.path, wasm)
	e.m.Reload(context.Background())
	return digest
}

// poll runs the reload goroutine's work until done holds.
func (e *env) poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.m.Reload(context.Background())
		e.m.advanceRollout(context.Background())
		if done() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// exists asks InstanceExists about node.
func (e *env) exists(node *v1.Node) (bool, error) {
	export, in, out := existenceQuestion(node)
	err := e.m.Call(context.Background(), export, in, out)
	return bool(*out.(*abi.Bool)), err
}

// existsAll asks InstanceExists about every Node, as the lifecycle
// controller does about NotReady ones, and fails on any answer but true.
func (e *env) existsAll(t *testing.T) {
	t.Helper()
	for _, n := range e.nodes {
		if ok, err := e.exists(n); !ok || err != nil {
			t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, ok, err)
		}
	}
}

// labels asks InstanceMetadata about node and returns its labels.
func (e *env) labels(node *v1.Node) (map[string]string, error) {
	var meta abi.InstanceMetadata
	err := e.m.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: node.Name, UID: string(node.UID)}, &meta)
	return meta.AdditionalLabels, err
}

func statsOf(r *rollout) decision.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func requests(e *env) int {
	n := 0
	for _, c := range e.cloud.Counters().Requests {
		n += c
	}
	return n
}

// closingBackend answers host.ErrClosed, as a closed module does, after
// putting next, when set, in service as a reload would have.
type closingBackend struct {
	Backend
	m    *Manager
	next Backend
}

func (c closingBackend) Call(context.Context, string, abi.Message, abi.Message) error {
	if c.next != nil {
		c.m.backend.Store(&c.next)
	}
	return host.ErrClosed
}

// answeringBackend answers every call with the name it was given.
type answeringBackend struct {
	Backend
	name string
}

func (a answeringBackend) Call(_ context.Context, _ string, _ abi.Message, out abi.Message) error {
	*out.(*abi.String) = abi.String(a.name)
	return nil
}

// TestCallFollowsAReload: a call that finds the module it picked closed
// by a reload goes to the module in service now; one whose module was
// closed without a replacement fails, rather than calling it again.
func TestCallFollowsAReload(t *testing.T) {
	m := &Manager{}
	closing := Backend(closingBackend{m: m, next: answeringBackend{name: "new"}})
	m.backend.Store(&closing)
	var out abi.String
	if err := m.Call(context.Background(), abi.ExportGetLoadBalancerName, new(abi.String), &out); err != nil || out != "new" {
		t.Fatalf("call during a reload: %q, %v; want the new module's answer", out, err)
	}

	alone := &Manager{}
	closed := Backend(closingBackend{m: alone})
	alone.backend.Store(&closed)
	if _, err := alone.OnInService(func(b Backend) error { return b.Call(context.Background(), "", nil, nil) }); !errors.Is(err, host.ErrClosed) {
		t.Fatalf("a closed module with no replacement: %v, want host.ErrClosed", err)
	}
}
