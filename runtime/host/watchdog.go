package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// stuckAfter is how long guest code may run on past the end of its
// context before the host stops waiting for it. The check the rewrite adds
// stops every shape of guest code within abortMargin; this is what holds
// if something still escapes it (a wazero fault, a host function that
// does not return): the pool slot the code holds is given back, so that
// the module's other calls, its recycling and Close go on, and the code's
// instance and memory stay as they are until it returns, since releasing
// them under it would crash the process.
const stuckAfter = 4 * abortMargin

// errSlotGivenBack is the error of a slot holder whose guest code ran past
// stuckAfter: the watchdog gave its slot back, which the holder must not.
var errSlotGivenBack = errors.New("guest code ran on past its deadline and the host stopped waiting for it; its instance is left until it returns")

// watchdog watches guest code that holds a pool slot.
type watchdog struct {
	m    *Module
	what string
	stop func() bool

	mu       sync.Mutex
	timer    *time.Timer
	finished bool
	// fired: the code ran past stuckAfter; gaveBack: and its slot went
	// back to the pool.
	fired, gaveBack bool
}

// watch starts watching guest code that runs under ctx, a guestContext,
// and holds a slot of m's pool; what names it in the report.
func (m *Module) watch(ctx context.Context, what string) *watchdog {
	w := &watchdog{m: m, what: what}
	w.stop = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.finished {
			w.timer = time.AfterFunc(stuckAfter, w.fire)
		}
	})
	return w
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.fired = true
	if w.gaveBack = w.m.stuck(w.what); w.gaveBack {
		w.m.pool.release(nil, time.Now())
	}
}

// done ends the watch once the guest code has returned, and reports
// whether the watchdog gave the slot back meanwhile, in which case the
// caller hands the instance to returned rather than to the pool.
func (w *watchdog) done() (gaveBack bool) {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.fired && !w.gaveBack {
		w.m.unstuck()
	}
	return w.gaveBack
}

// stuck records guest code the host stopped waiting for, and says
// whether to give its slot back: not once as many instances are stuck as
// the pool has slots, so that their memory stays within twice the pool's;
// the module then serves with fewer slots, or none.
func (m *Module) stuck(what string) (giveBack bool) {
	m.life.Lock()
	m.stuckCount++
	giveBack = m.stuckCount <= m.cfg.PoolSize
	m.life.Unlock()
	instancesStuck.WithLabelValues(m.cfg.Name).Inc()
	klog.ErrorS(nil, "Guest code runs on past its deadline: the host gave its pool slot back and leaves its instance until it returns",
		"module", m.cfg.Name, "in", what, "after", stuckAfter)
	if m.cfg.OnStuck != nil {
		m.cfg.OnStuck(what)
	}
	return giveBack
}

// returned closes the instance of guest code that came back after the
// watchdog gave up on it (nil when it was being made), and releases the
// module's compiled code if Close left it to this code.
func (m *Module) returned(inst *instance) {
	if inst != nil {
		inst.close(context.Background())
	}
	klog.InfoS("Guest code the host had stopped waiting for returned; its instance is closed", "module", m.cfg.Name)
	m.unstuck()
}

// unstuck counts out guest code stuck recorded, which has returned.
func (m *Module) unstuck() {
	instancesStuck.WithLabelValues(m.cfg.Name).Dec()
	m.life.Lock()
	m.stuckCount--
	last := m.closing && m.stuckCount == 0
	m.life.Unlock()
	if last {
		m.releaseCode()
	}
}
