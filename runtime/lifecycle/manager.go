package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// Backend answers the ABI's methods. A *host.Module is the backend of
// every real deployment; the same provider code linked into the host can
// be another, which is how benchmarks compare the two under identical
// controllers and error mapping.
type Backend interface {
	Call(ctx context.Context, export string, in, out abi.Message) error
	Info() host.Info
	Close(ctx context.Context) error
}

// Options is what a Manager needs: the module file and its checks, the
// rollout's settings, and the adapter's means of loading a module,
// reporting Events and knowing the Nodes.
type Options struct {
	// Name labels the lifecycle's metrics: the module's name in the
	// cloud-config, or its file's.
	Name string
	// Path is the module file; Source is where it comes from, as the
	// last-known-good record names it (module.image, else Path).
	Path, Source string
	Trust        modulefile.Trust
	Rollout      cloudconfig.Rollout
	// ReloadInterval is how often Path is polled for a new version; 0
	// disables hot reload.
	ReloadInterval time.Duration
	// Record is the last-known-good record, nil without one.
	Record *modulefile.Store
	// Load compiles and initialises a module file; shadow starts it as a
	// candidate, which gets only the rate budget's spare room
	// (egress.RateBudget).
	Load func(ctx context.Context, file modulefile.File, shadow bool) (Backend, error)
	// Emit reports an Event on the CCM's Pod.
	Emit func(reason events.Reason, message string)
	// ListNodes lists the cached Nodes, nil before the cache synced;
	// ExistenceQuestion is the call the lifecycle controller would make
	// to decide whether node is gone. The probe that ends a shadow period
	// asks both.
	ListNodes         func() []*v1.Node
	ExistenceQuestion func(node *v1.Node) (export string, in, out abi.Message)
}

// Manager carries out the module's lifecycle: it answers each call with
// the module in service, and loads, shadows, promotes, rejects, rolls
// back and records modules as this package's decisions say. The call
// path costs one atomic load, two while a rollout is in progress; the
// rest runs on the reload goroutine (Watch).
type Manager struct {
	opts    Options
	backend atomic.Pointer[Backend]
	// capabilities are the first module's: the controllers decide at
	// start-up which ones to run, so a module with others cannot replace
	// it.
	capabilities host.Info
	// rollout is the module change in progress, nil when there is none:
	// the only thing the call path looks at beyond the backend.
	rollout atomic.Pointer[rollout]
	// served is the module in service, since servedSince; refused the
	// last file refused. Only the reload goroutine touches them once the
	// CCM runs.
	served      modulefile.File
	servedSince time.Time
	refused     refusal
	// recorded is the digest the last-known-good record holds,
	// recordFailed the digest whose recording failed last.
	recorded, recordFailed string
}

// Start puts the first module in service, as DecideStart decides: the
// configured one, or the last-known-good one while the configured one is
// rolled out as a hot reload would be or, when it cannot be read,
// verified or loaded, rejected. Only when neither can serve does the CCM
// refuse to start. configuredErr is a problem found before reading the
// configured module (a failed pull).
func Start(ctx context.Context, opts Options, configuredErr error) (*Manager, error) {
	m := &Manager{opts: opts}
	var file modulefile.File
	var configured Backend
	if configuredErr == nil {
		file, configuredErr = modulefile.Read(opts.Path, opts.Trust)
	}
	if configuredErr == nil {
		if configured, configuredErr = opts.Load(ctx, file, false); configuredErr != nil {
			configuredErr = fmt.Errorf("module %s: %w", opts.Path, configuredErr)
		}
	}
	var record *modulefile.Record
	var recordErr error
	if opts.Record != nil {
		record, recordErr = opts.Record.Load(ctx)
	}
	facts := decision.StartFacts{HasRecord: record != nil, ConfiguredUsable: configuredErr == nil}
	facts.SameDigest = facts.HasRecord && facts.ConfiguredUsable && record.Digest == file.Digest
	var recordFile modulefile.File
	var recorded Backend
	if decision.NeedsRecorded(facts) {
		recordFile, recorded, recordErr = m.loadRecorded(ctx, record)
		facts.RecordedUsable = recordErr == nil
		facts.SameCapabilities = facts.RecordedUsable && facts.ConfiguredUsable &&
			slices.Equal(recorded.Info().Capabilities, configured.Info().Capabilities)
	}
	reason, ok := decision.DecideStart(facts)
	if !ok {
		return nil, neitherServes(configuredErr, recordErr)
	}
	if reason.ServesConfigured() {
		m.startServing(configured, file, reason, record)
	} else {
		m.startServing(recorded, recordFile, reason, record)
	}
	switch reason {
	case decision.FirstInstall:
		m.noteFirstInstall(recordErr)
	case decision.LastKnownGoodUnusable:
		m.warnStart(fmt.Sprintf("module %s serves without a shadow period: the last-known-good module cannot stand in for it: %v", file.Digest, recordErr))
	case decision.ConfiguredUnusable:
		m.refused = checksFailed(file, configuredErr)
		reloads.WithLabelValues(m.opts.Name, "rejected").Inc()
		m.warnStart(fmt.Sprintf("configured module rejected at start, last-known-good %s (recorded %s) serves: %v", record.Digest, record.RecordedAt, configuredErr))
	case decision.CapabilitiesChanged:
		recorded.Close(ctx)
		m.warnStart(fmt.Sprintf("module %s serves without a shadow period: its capabilities %v differ from the last-known-good's %v, and the controllers start with the configured ones",
			file.Digest, configured.Info().Capabilities, recorded.Info().Capabilities))
	case decision.Shadowing:
		klog.InfoS("the configured module differs from the last-known-good, which serves while the configured one is rolled out",
			"configuredSHA256", file.Digest, "lastKnownGoodSHA256", record.Digest, "recordedAt", record.RecordedAt)
		m.startRollout(configured, file)
	}
	return m, nil
}

// Fixed returns a Manager that serves b for good: without a module file
// there is nothing to reload, roll out or record.
func Fixed(b Backend) *Manager {
	m := &Manager{capabilities: b.Info()}
	m.backend.Store(&b)
	return m
}

// neitherServes is the error of a start where no module can serve.
func neitherServes(configuredErr, recordErr error) error {
	if recordErr == nil {
		return configuredErr
	}
	return fmt.Errorf("%w; the last-known-good cannot stand in for it either: %w", configuredErr, recordErr)
}

// startServing puts the first module in service; its capabilities decide
// which controllers run.
func (m *Manager) startServing(b Backend, file modulefile.File, reason decision.StartReason, record *modulefile.Record) {
	m.capabilities = b.Info()
	m.backend.Store(&b)
	m.serve(file)
	if record != nil {
		m.recorded = record.Digest
	}
	served := "last_known_good"
	if reason.ServesConfigured() {
		served = "configured"
	}
	moduleStarts.WithLabelValues(m.opts.Name, served, reason.String()).Inc()
	klog.InfoS("provider module loaded", "path", m.opts.Path, "sha256", file.Digest, "served", served, "reason", reason.String(),
		"capabilities", m.capabilities.Capabilities)
}

// serve notes file as the module in service.
func (m *Manager) serve(file modulefile.File) {
	m.served, m.servedSince = withoutWasm(file), time.Now()
}

// withoutWasm is file once its module is compiled: the decompressed module
// is not read again (the last-known-good record keeps the file as
// stored), and a Manager would otherwise hold it for as long as the
// module serves.
func withoutWasm(file modulefile.File) modulefile.File {
	file.Wasm = nil
	return file
}

// loadRecorded checks and loads the last-known-good module.
func (m *Manager) loadRecorded(ctx context.Context, record *modulefile.Record) (modulefile.File, Backend, error) {
	file, err := record.File(m.opts.Trust)
	if err == nil {
		var mod Backend
		if mod, err = m.opts.Load(ctx, file, false); err == nil {
			return file, mod, nil
		}
	}
	return file, nil, fmt.Errorf("last-known-good module %s from %s: %w", record.Digest, m.opts.Record, err)
}

// noteFirstInstall says why nothing guards this start but the deletion
// budget.
func (m *Manager) noteFirstInstall(recordErr error) {
	switch {
	case recordErr != nil:
		m.warnStart(fmt.Sprintf("module serves without a shadow period: the last-known-good record could not be read: %v", recordErr))
	case m.opts.Record != nil:
		klog.InfoS("no last-known-good module recorded yet (first install): the configured module serves, guarded by the deletion budget alone, and is recorded once it has served its rollback window",
			"record", m.opts.Record)
	}
}

// warnStart reports a start that did not go as configured.
func (m *Manager) warnStart(msg string) {
	klog.ErrorS(nil, msg, "record", m.opts.Record)
	m.opts.Emit(events.ModuleStart, msg)
}

// Capabilities are the first module's, which every later one keeps.
func (m *Manager) Capabilities() host.Info { return m.capabilities }

// Call runs one export on the module in service (OnInService). While a
// rollout is in progress the answer is also shown to it, after which the
// caller returns at once.
func (m *Manager) Call(ctx context.Context, export string, in, out abi.Message) error {
	_, err := m.OnInService(func(b Backend) error { return b.Call(ctx, export, in, out) })
	if r := m.rollout.Load(); r != nil {
		r.observe(ctx, export, in, out, err)
	}
	return err
}

// OnInService runs fn with the module in service and returns that module.
// fn that picked the module just as a reload replaced it finds it closed
// (host.ErrClosed) and runs again with the new one: a reload never fails
// a call.
func (m *Manager) OnInService(fn func(Backend) error) (*Backend, error) {
	for {
		b := m.backend.Load()
		err := fn(*b)
		if errors.Is(err, host.ErrClosed) && m.backend.Load() != b {
			continue
		}
		return b, err
	}
}

// InService is the module in service, for calls no rollout sees. Every
// swap stores a new pointer, so it also tells one module in service from
// the next.
func (m *Manager) InService() *Backend { return m.backend.Load() }

// Previous is the module a promoted one replaced, kept for the rollback
// window, and its digest; nil outside a probation.
func (m *Manager) Previous() (Backend, string) {
	if r := m.rollout.Load(); r != nil && r.phase == decision.Probation {
		return r.other, r.otherFile.Digest
	}
	return nil, ""
}

// Watch starts the reload goroutine, which runs until stop closes, when
// hot reload or the last-known-good record is on: it advances a rollout
// begun at start and records the module in service.
func (m *Manager) Watch(stop <-chan struct{}) {
	if m.served.Digest == "" || m.opts.ReloadInterval == 0 && m.opts.Record == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	go m.watch(ctx)
}

// Close releases the module, and the other module of a rollout in
// progress.
func (m *Manager) Close(ctx context.Context) error {
	if r := m.rollout.Swap(nil); r != nil {
		r.other.Close(ctx)
	}
	return (*m.backend.Load()).Close(ctx)
}
