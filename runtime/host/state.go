package host

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// sharedState is a module's key/value store in the host: what its
// instances, which are stateless and recycled every few calls, need across
// calls, such as a snapshot of the cloud's servers. It belongs to one
// *Module, so a new module (a reload, a shadow, a rollback) starts empty
// and never reads what another module wrote.
//
// It is bounded in bytes, counted with a fixed overhead per entry, and
// evicts the least recently used entries first: a module cannot grow the
// host past what the operator budgeted, only churn its own entries.
//
// Claims make "compute once" possible across instances: the first reader
// that finds no fresh value and asks to claim it fills it, the others wait
// for that value instead of asking the cloud the same question. A claim
// ends when its holder stores the key or its call ends (a trap, a timeout,
// or a call that gave up), so a broken holder blocks the others for at
// most its own call.
type sharedState struct {
	module string
	// budget bounds the bytes held, maxEntry one entry.
	budget, maxEntry int

	mu      sync.Mutex
	entries map[string]*list.Element // of *stateEntry
	lru     list.List                // most recently used at the front
	bytes   int
	claims  map[string]*stateClaim
}

type stateEntry struct {
	key     string
	value   []byte
	written time.Time
}

type stateClaim struct {
	holder *instance
	done   chan struct{}
}

// stateEntryOverhead is what an entry costs besides its key and value: the
// map slot, the list element and the entry itself, rounded up.
const stateEntryOverhead = 128

func newSharedState(module string, budget int) *sharedState {
	return &sharedState{module: module, budget: budget, maxEntry: budget / 4,
		entries: map[string]*list.Element{}, claims: map[string]*stateClaim{}}
}

func (e *stateEntry) size() int { return len(e.key) + len(e.value) + stateEntryOverhead }

// get returns the value under key if it was written at most maxAge ago
// (any age when maxAge is negative). Without one, and with claim, inst
// either takes the key's claim (and is told NotFound: it fills the key) or
// waits for the instance that holds it, then looks again. The value
// returned is never modified afterwards: set replaces it.
func (s *sharedState) get(ctx context.Context, inst *instance, key string, maxAge time.Duration, claim bool) ([]byte, abi.Errno) {
	waited := false
	for {
		s.mu.Lock()
		if el, ok := s.entries[key]; ok {
			e := el.Value.(*stateEntry)
			if maxAge < 0 || time.Since(e.written) <= maxAge {
				s.lru.MoveToFront(el)
				s.mu.Unlock()
				stateLookups.WithLabelValues(s.module, lookupResult(waited, "hit")).Inc()
				return e.value, 0
			}
		}
		if !claim {
			s.mu.Unlock()
			stateLookups.WithLabelValues(s.module, "miss").Inc()
			return nil, abi.ErrnoNotFound
		}
		c, held := s.claims[key]
		if !held || c.holder == inst {
			if !held {
				s.claims[key] = &stateClaim{holder: inst, done: make(chan struct{})}
				inst.claims = append(inst.claims, key)
			}
			s.mu.Unlock()
			stateLookups.WithLabelValues(s.module, lookupResult(waited, "claimed")).Inc()
			return nil, abi.ErrnoNotFound
		}
		s.mu.Unlock()
		select {
		case <-c.done:
			waited = true
		case <-ctx.Done():
			// The call is over anyway; NotFound without a claim makes the
			// guest go to the cloud, where the expired deadline stops it.
			stateLookups.WithLabelValues(s.module, "wait_expired").Inc()
			return nil, abi.ErrnoNotFound
		}
	}
}

// lookupResult tells answers that came after waiting for another
// instance's fill from those that did not.
func lookupResult(waited bool, result string) string {
	if waited {
		return result + "_after_wait"
	}
	return result
}

// set stores a copy of value under key, evicting the least recently used
// entries beyond the budget, and ends any claim on key: its waiters find
// the value.
func (s *sharedState) set(key string, value []byte) abi.Errno {
	e := &stateEntry{key: key, value: append([]byte(nil), value...), written: time.Now()}
	if e.size() > s.maxEntry {
		return abi.ErrnoTooLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.bytes
	if el, ok := s.entries[key]; ok {
		s.bytes -= el.Value.(*stateEntry).size()
		el.Value = e
		s.lru.MoveToFront(el)
	} else {
		s.entries[key] = s.lru.PushFront(e)
	}
	s.bytes += e.size()
	for s.bytes > s.budget {
		oldest := s.lru.Back()
		s.removeLocked(oldest)
		stateEvictions.WithLabelValues(s.module).Inc()
	}
	if c, ok := s.claims[key]; ok {
		close(c.done)
		delete(s.claims, key)
	}
	s.accountLocked(before)
	return 0
}

func (s *sharedState) delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[key]; ok {
		before := s.bytes
		s.removeLocked(el)
		s.accountLocked(before)
	}
}

// accountLocked moves the bytes gauge by what changed since before. The
// gauge adds rather than sets because the module in service and a shadow
// of its successor can share a name while each holds its own state.
func (s *sharedState) accountLocked(before int) {
	stateBytes.WithLabelValues(s.module).Add(float64(s.bytes - before))
}

func (s *sharedState) removeLocked(el *list.Element) {
	e := s.lru.Remove(el).(*stateEntry)
	delete(s.entries, e.key)
	s.bytes -= e.size()
}

// releaseClaims ends the claims inst still holds when its call ends, so
// that a waiter takes over the fill.
func (s *sharedState) releaseClaims(inst *instance) {
	if len(inst.claims) == 0 {
		return
	}
	s.mu.Lock()
	for _, key := range inst.claims {
		if c, ok := s.claims[key]; ok && c.holder == inst {
			close(c.done)
			delete(s.claims, key)
		}
	}
	s.mu.Unlock()
	inst.claims = inst.claims[:0]
}

// clear drops every entry, when the module closes: the memory is the
// operator's, not the module's.
func (s *sharedState) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.bytes
	s.entries, s.bytes = map[string]*list.Element{}, 0
	s.lru.Init()
	s.accountLocked(before)
}
