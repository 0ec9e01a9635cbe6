package host

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
)

// pool bounds the instances of one module. A slot is held for the whole of
// a call, so at most cap(slots) calls run at once and each has an instance
// to itself; instances are made lazily, up to that bound, and reused.
type pool struct {
	create func(context.Context) (*instance, error)
	slots  chan struct{}
	closed chan struct{}

	closeOnce sync.Once
	// drained counts the slots drain has taken; only Close touches it.
	drained int

	mu sync.Mutex
	// idle is in the order of release, the longest idle first.
	idle []*instance
	// idleTimeout is how long an instance may stay idle before a release
	// closes it (idleInstanceTimeout).
	idleTimeout time.Duration
	idleClosed  metrics.CounterMetric

	// busy and idleGauge are the module's pool_instances gauges, looked up
	// once rather than on every acquire and release.
	busy, idleGauge metrics.GaugeMetric
}

// newPool makes the pool of module; the metrics must be registered, or
// its gauges would stay unregistered no-ops.
func newPool(module string, size int, create func(context.Context) (*instance, error)) *pool {
	return &pool{create: create, slots: make(chan struct{}, size), closed: make(chan struct{}), idleTimeout: idleInstanceTimeout,
		busy: poolInstances.WithLabelValues(module, "busy"), idleGauge: poolInstances.WithLabelValues(module, "idle"),
		idleClosed: instancesIdleClosed.WithLabelValues(module)}
}

// idleInstanceTimeout is how long an instance may stay idle before the
// pool closes it. A burst of concurrent calls makes instances that the
// calls after it, taking the most recently released one, then leave
// alone; each keeps the linear memory it grew to, which only closing
// gives back. Making one again costs an instantiation and init, which a
// minute of idleness repays.
const idleInstanceTimeout = time.Minute

// acquire takes a slot and an instance for it: of the idle instances, the
// one want ranks highest, the most recently released among equals (its
// memory is the likeliest to be resident), or a new one when none is idle.
func (p *pool) acquire(ctx context.Context, want nodeListAffinity) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		// Close ends the contexts of the calls waiting here once it has
		// drained the pool: their callers retry on the module that
		// replaced this one, as they do when closed wins the select.
		select {
		case <-p.closed:
			return nil, ErrClosed
		default:
		}
		return nil, ctx.Err()
	case <-p.closed:
		return nil, ErrClosed
	}
	select {
	case <-p.closed:
		// Both were ready: no guest code starts once drain has begun.
		<-p.slots
		return nil, ErrClosed
	default:
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		best := n - 1
		for i, rank := n-2, want.rank(p.idle[n-1]); i >= 0; i-- {
			if r := want.rank(p.idle[i]); r > rank {
				best, rank = i, r
			}
		}
		inst := p.idle[best]
		p.idle = slices.Delete(p.idle, best, best+1)
		p.mu.Unlock()
		p.observe()
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := p.create(ctx)
	if err != nil {
		if !errors.Is(err, errSlotGivenBack) {
			<-p.slots
		}
		return nil, err
	}
	p.observe()
	return inst, nil
}

// release returns a healthy instance to the pool at now, when its call
// ended; a nil instance just frees the slot (its instance was closed).
func (p *pool) release(inst *instance, now time.Time) {
	if inst != nil {
		inst.idleSince = now
		p.mu.Lock()
		var stale []*instance
		if n := p.staleIdle(now); n > 0 {
			stale = slices.Clone(p.idle[:n])
			p.idle = slices.Delete(p.idle, 0, n)
		}
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
		// Closed while this call still holds its slot, so that drain,
		// which waits for every slot, never sees them half closed.
		for _, s := range stale {
			s.close(context.Background())
			p.idleClosed.Inc()
		}
	}
	<-p.slots
	p.observe()
}

// staleIdle is how many of the idle instances, from the first, have been
// idle longer than idleTimeout at now.
func (p *pool) staleIdle(now time.Time) int {
	for i, inst := range p.idle {
		if now.Sub(inst.idleSince) <= p.idleTimeout {
			return i
		}
	}
	return len(p.idle)
}

// ErrClosed is returned for calls made after Close began.
var ErrClosed = errors.New("module is closed")

// drain refuses new calls and takes every slot, so that no call or
// recycling runs on the pool's instances, waiting for those in flight
// until done is closed (a nil done waits for good). It reports whether it
// took them all; called again, it waits for the rest.
func (p *pool) drain(done <-chan struct{}) bool {
	p.closeOnce.Do(func() { close(p.closed) })
	for ; p.drained < cap(p.slots); p.drained++ {
		select {
		case p.slots <- struct{}{}:
		case <-done:
			return false
		}
	}
	return true
}

// closeIdle closes the instances of a drained pool.
func (p *pool) closeIdle(ctx context.Context) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close(ctx)
	}
}

func (p *pool) observe() {
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	busy := len(p.slots)
	p.busy.Set(float64(busy))
	p.idleGauge.Set(float64(idle))
}
