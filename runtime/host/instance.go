package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host/internal/loopcheck"
	"github.com/wasmccm/wasmccm/runtime/sharedstate"
)

// maxResultBytes bounds a result the host will decode.
const maxResultBytes = 8 << 20

// instance is one instantiation of a module. It serves one call at a time
// (the pool guarantees it), so its buffers are reused without locking.
type instance struct {
	owner *Module
	mod   api.Module
	mem   api.Memory
	// enter is loopcheck.EnterExport, through which every export is
	// called: wazero gives each exported function a stack of its own,
	// which keeps the size it grew to, so one entry keeps one stack per
	// instance, which Config.StackLimitBytes bounds.
	enter api.Function
	sleep *sleeper
	stack [3]uint64
	input []byte

	// recycleAbove is the memory size, in bytes, past which the instance
	// is replaced after its call; set once init has run, from readyBytes,
	// its memory then, and again when it is sent a Node list.
	recycleAbove, readyBytes uint64
	// idleSince is when the pool last took it back.
	idleSince time.Time

	// pending is the result a host function announced and take_result
	// will copy out; violation is set when a host function aborts the call.
	pending    []byte
	hasPending bool
	violation  error
	// shadowRefused is set when the rate budget refused a request of the
	// call for want of spare room, the module being in shadow
	// (egress.RateBudget).
	shadowRefused bool
	// claims are the shared state keys this instance's call claimed,
	// released when the call ends.
	claims sharedstate.Holder

	// nodes is the Node list last sent through
	// abi.ExportSetLoadBalancerNodes, which the module answers load
	// balancer calls with; sentNodes is set once one was.
	nodes     []abi.Node
	sentNodes bool
}

func newInstance(m *Module, mod api.Module, sleep *sleeper) *instance {
	inst := &instance{
		owner: m,
		mod:   mod,
		sleep: sleep,
		mem:   mod.Memory(),
		enter: mod.ExportedFunction(loopcheck.EnterExport),
	}
	liveInstances.add(inst)
	return inst
}

func (i *instance) close(ctx context.Context) {
	liveInstances.remove(i)
	_ = i.mod.Close(ctx)
}

type instanceKey struct{}

// callerInstance returns the instance whose call is running; host functions
// use it to reach that call's pending result.
func callerInstance(ctx context.Context) *instance {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	return inst
}

// run calls the module's export entries[entry] with parameters a and b, through
// enter, with the guest's sleeps ending with ctx, a guestContext; export
// names the call in errors. The export's result is in i.stack[0]. A guest
// that returns after ctx ended, before the check stopped it (from a sleep
// cut short, say), failed all the same: its answer is late, and the
// instance is replaced like a stopped one.
func (i *instance) run(ctx context.Context, export string, entry uint32, a, b uint64) error {
	i.sleep.done = ctx.Done()
	i.stack[0], i.stack[1], i.stack[2] = uint64(entry), a, b
	err := i.enter.CallWithStack(ctx, i.stack[:])
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return i.classify(ctx, export, err)
	}
	return nil
}

func (i *instance) abiVersion(ctx context.Context) (int32, error) {
	if err := i.run(ctx, abi.ExportABIVersion, entryABIVersion, 0, 0); err != nil {
		return 0, err
	}
	return int32(uint32(i.stack[0])), nil
}

// nodeListAffinity is which idle instance a call prefers, so that as few
// instances as possible hold a Node list: each one holding a list keeps
// it, and a recycling mark raised by it, between calls
// (Config.recycleMarkHolding). A call that lists Nodes prefers the
// instance holding its list, which it need not send, and then one holding
// another list, which it replaces; every other call prefers an instance
// holding none. With the service controller's one worker, one instance
// then holds the list however many the other controllers keep busy.
type nodeListAffinity struct {
	// req is the call's request when it lists Nodes and the module takes
	// lists on their own (abi.ExportSetLoadBalancerNodes); nil otherwise.
	req *abi.LoadBalancerRequest
}

// affinity is the nodeListAffinity of a call of export with in, worked
// out once per call for the pool and for withNodesSent.
func (m *Module) affinity(export string, in abi.Message) nodeListAffinity {
	if req, ok := in.(*abi.LoadBalancerRequest); ok && abi.NodesListed(export) && m.methods[abi.ExportSetLoadBalancerNodes] {
		return nodeListAffinity{req: req}
	}
	return nodeListAffinity{}
}

func (a nodeListAffinity) rank(inst *instance) int {
	switch {
	case a.req == nil:
		if inst.sentNodes {
			return 0
		}
		return 1
	case !inst.sentNodes:
		return 0
	case abi.SameNodes(inst.nodes, a.req.Nodes):
		return 2
	default:
		return 1
	}
}

// withNodesSent returns the request to send inst for export: when the
// call lists Nodes for a module that takes lists on their own (a.req), the
// list is sent first, unless it is the one inst was sent last, and the
// request goes without it. A list is known by its identity: the provider
// adapter passes the same slice for as long as the cluster's Nodes stay
// the same, and never changes one it passed.
func (m *Module) withNodesSent(ctx context.Context, inst *instance, export string, in abi.Message, a nodeListAffinity) (abi.Message, error) {
	if export == abi.ExportSetLoadBalancerNodes {
		// A caller sending a list itself (wasmccm call): which list the
		// instance holds is no longer known.
		inst.nodes, inst.sentNodes = nil, false
		return in, nil
	}
	req := a.req
	if req == nil {
		return in, nil
	}
	if !inst.sentNodes || !abi.SameNodes(inst.nodes, req.Nodes) {
		inst.nodes, inst.sentNodes = nil, false
		before, start := uint64(inst.mem.Size()), time.Now()
		err := m.callInstance(ctx, inst, abi.ExportSetLoadBalancerNodes, &abi.LoadBalancerNodes{Nodes: req.Nodes}, nil)
		m.observe(abi.ExportSetLoadBalancerNodes, time.Since(start), err)
		// The list's encoding is sent once per change, taken or not: a
		// buffer kept at its size for the small messages that follow
		// would only hold memory, in every instance.
		inst.input = nil
		if err != nil {
			return nil, err
		}
		inst.nodes, inst.sentNodes = req.Nodes, true
		// Growth measures what a list took only when the heap had no room
		// for it; a list that fits where the last one was grows nothing,
		// so the mark stays where an earlier list put it.
		inst.recycleAbove = max(inst.recycleAbove, m.cfg.recycleMarkHolding(inst.readyBytes, uint64(inst.mem.Size())-before))
		if size := uint64(inst.mem.Size()); size > inst.recycleAbove {
			m.markBelowList.Do(func() {
				remedy := "raise limits.recycleAboveMiB or leave it unset"
				if m.cfg.RecycleAbovePages == 0 {
					remedy = "the derived mark stops at a quarter of the memory cap: raise limits.memoryLimitMiB"
				}
				klog.InfoS("The recycling mark is below what an instance holding its load balancer Node list takes: every load balancer call replaces the instance and sends the list again",
					"module", m.cfg.Name, "memoryBytes", size, "highWaterBytes", inst.recycleAbove, "nodes", len(req.Nodes), "remedy", remedy)
			})
		}
	}
	slim := *req
	slim.Nodes = nil
	return &slim, nil
}

// callInstance performs one method call on inst: input into the guest's
// buffer, the export, then the result decoded straight from guest memory.
func (m *Module) callInstance(ctx context.Context, inst *instance, export string, in, out abi.Message) error {
	fail := func(reason string, err error) error {
		return &FailureError{Export: export, Reason: reason, Err: err}
	}
	ctx = context.WithValue(ctx, instanceKey{}, inst)
	// nil rather than pending[:0]: a result the guest never took would
	// otherwise stay alive until the next one.
	inst.hasPending, inst.pending, inst.violation, inst.shadowRefused = false, nil, nil, false
	defer m.state.ReleaseClaims(&inst.claims)

	inst.input = abi.Marshal(inst.input, in)
	size := uint32(len(inst.input))
	if err := inst.run(ctx, export, entryAlloc, uint64(size), 0); err != nil {
		return err
	}
	ptr := uint32(inst.stack[0])
	if !inst.mem.Write(ptr, inst.input) {
		return fail(ReasonABIViolation, fmt.Errorf("%s returned %d bytes at %#x, outside guest memory", abi.ExportAlloc, size, ptr))
	}

	if m.setsDeadline {
		// ctx is a guestContext, so it always has a deadline.
		deadline, _ := ctx.Deadline()
		if err := inst.run(ctx, export, entrySetDeadline, uint64(max(time.Until(deadline), 0)), 0); err != nil {
			return err
		}
	}
	if err := inst.run(ctx, export, entryIndex[export], uint64(ptr), uint64(size)); err != nil {
		return err
	}
	rptr, rsize := abi.UnpackResult(inst.stack[0])
	if rsize > maxResultBytes {
		return fail(ReasonABIViolation, fmt.Errorf("result of %d bytes exceeds the %d-byte limit", rsize, maxResultBytes))
	}
	view, ok := inst.mem.Read(rptr, rsize)
	if !ok {
		return fail(ReasonABIViolation, fmt.Errorf("result of %d bytes at %#x is outside guest memory", rsize, rptr))
	}
	outcome, err := abi.DecodeResult(view, out)
	if err != nil {
		return fail(ReasonABIViolation, fmt.Errorf("decoding result: %w", err))
	}
	if outcome.Status != abi.StatusOK {
		return &StatusError{Export: export, Outcome: outcome}
	}
	return nil
}

// classify explains why a guest call returned an error: a host function
// refused the guest's memory or message, the deadline passed, Close
// aborted the call, the caller gave up, or the guest trapped (a Go panic,
// unreachable, out of memory).
func (i *instance) classify(ctx context.Context, export string, err error) error {
	reason := ReasonTrap
	switch {
	case i.violation != nil:
		reason, err = ReasonABIViolation, i.violation
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		reason, err = ReasonTimeout, fmt.Errorf("%w; the instance was stopped", context.Cause(ctx))
	case errors.Is(err, errStackExhausted):
		err = fmt.Errorf("%w; the instance was stopped", errStackExhausted)
	case errors.Is(i.owner.stopCause(ctx), ErrClosed):
		reason, err = ReasonUnavailable, errAborted
	case ctx.Err() != nil:
		reason = ReasonCanceled
	}
	return &FailureError{Export: export, Reason: reason, Err: err}
}
