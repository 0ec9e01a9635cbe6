// Package sharedstate holds a module's shared state, the key/value store
// behind the state_get, state_set and state_delete host functions (Store):
// its byte budget and least-recently-used eviction, the claims that let
// one instance fill a key while the others wait for it, and its metrics.
package sharedstate

import (
	"container/list"
	"context"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmccm/wasmccm/abi"
)

// Store is a module's key/value store in the host: what its instances,
// which are stateless and recycled every few calls, need across calls,
// such as a snapshot of the cloud's servers. It belongs to one module, so
// a new module (a reload, a shadow, a rollback) starts empty and never
// reads what another module wrote.
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
// most its own call. Claims are held in the host too, so they count
// against the budget like entries, and together they may take no more
// than one entry may: a module that claims key after key evicts its own
// entries, then is refused claims, and never grows the host.
type Store struct {
	module string
	// budget bounds the bytes held, entries and claims; maxEntry bounds
	// one entry, and all claims together.
	budget, maxEntry int

	mu      sync.Mutex
	entries map[string]*list.Element // of *stateEntry
	lru     list.List                // most recently used at the front
	bytes   int                      // held by entries
	claims  map[string]*stateClaim
	claimed int // bytes held by claims
	// The most entries and claims each map held since it was made; see
	// compacted.
	entriesPeak, claimsPeak int
}

type stateEntry struct {
	key     string
	value   []byte
	written time.Time
}

type stateClaim struct {
	holder *Holder
	done   chan struct{}
}

// Holder is one instance's part in the store: the keys its running call
// claimed, released when the call ends (Store.ReleaseClaims). Its address
// identifies the instance, so each instance keeps its own.
type Holder struct {
	claims []string
}

// stateEntryOverhead is what an entry costs besides its key and value: the
// map slot, the list element, the entry itself and the rounding up of its
// key and value to the allocator's sizes, with the map just grown.
// stateClaimOverhead is the same for a claim: the map slot, the claim, its
// channel and the holder's record of it.
const (
	stateEntryOverhead = 192
	stateClaimOverhead = 256
)

// New makes the store of the module named module, which labels its
// metrics, holding at most budget bytes.
func New(module string, budget int) *Store {
	return &Store{module: module, budget: budget, maxEntry: budget / 4,
		entries: map[string]*list.Element{}, claims: map[string]*stateClaim{}}
}

func (e *stateEntry) size() int { return entrySize(e.key, len(e.value)) }

func entrySize(key string, valueLen int) int { return len(key) + valueLen + stateEntryOverhead }

func claimSize(key string) int { return len(key) + stateClaimOverhead }

// held is what the budget bounds.
func (s *Store) held() int { return s.bytes + s.claimed }

// Get returns the value under key if it was written at most maxAge ago
// (any age when maxAge is negative). Without one, and with claim, h
// either takes the key's claim (and is told NotFound: it fills the key) or
// waits for the instance that holds it, then looks again; when the claims
// already take their share of the budget, it is told NotFound without a
// claim. The value returned is never modified afterwards: set replaces it.
// key is only read, during the call, and copied when claimed.
func (s *Store) Get(ctx context.Context, h *Holder, key []byte, maxAge time.Duration, claim bool) ([]byte, abi.Errno) {
	waited := false
	for {
		s.mu.Lock()
		if el, ok := s.entries[string(key)]; ok {
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
		c, held := s.claims[string(key)]
		if !held || c.holder == h {
			result := "claimed"
			if !held && !s.claimLocked(h, string(key)) {
				result = "claim_refused"
			}
			s.mu.Unlock()
			stateLookups.WithLabelValues(s.module, lookupResult(waited, result)).Inc()
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

// claimLocked gives h the claim on key, evicting the least recently
// used entries to make room for it; false when the claims would take more
// than their share.
func (s *Store) claimLocked(h *Holder, key string) bool {
	if s.claimed+claimSize(key) > s.maxEntry {
		return false
	}
	before := s.held()
	s.claims[key] = &stateClaim{holder: h, done: make(chan struct{})}
	s.claimsPeak = max(s.claimsPeak, len(s.claims))
	s.claimed += claimSize(key)
	h.claims = append(h.claims, key)
	s.evictLocked()
	s.accountLocked(before)
	return true
}

// endClaimLocked wakes the claim's waiters and gives its bytes back.
func (s *Store) endClaimLocked(key string, c *stateClaim) {
	close(c.done)
	delete(s.claims, key)
	s.claims = compacted(s.claims, &s.claimsPeak)
	s.claimed -= claimSize(key)
}

// Set stores a copy of value under key, evicting the least recently used
// entries beyond the budget, and ends any claim on key: its waiters find
// the value. The size is checked before the copy, so a value too large
// costs the host nothing.
func (s *Store) Set(key string, value []byte) abi.Errno {
	if entrySize(key, len(value)) > s.maxEntry {
		return abi.ErrnoTooLarge
	}
	e := &stateEntry{key: key, value: append([]byte(nil), value...), written: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.held()
	if c, ok := s.claims[key]; ok {
		s.endClaimLocked(key, c)
	}
	if el, ok := s.entries[key]; ok {
		s.bytes -= el.Value.(*stateEntry).size()
		el.Value = e
		s.lru.MoveToFront(el)
	} else {
		s.entries[key] = s.lru.PushFront(e)
		s.entriesPeak = max(s.entriesPeak, len(s.entries))
	}
	s.bytes += e.size()
	s.evictLocked()
	s.accountLocked(before)
	return 0
}

// evictLocked removes the least recently used entries until what is held
// fits the budget. Claims and one entry take at most half of it, so the
// entry just stored is never among those removed.
func (s *Store) evictLocked() {
	for s.held() > s.budget {
		s.removeLocked(s.lru.Back())
		stateEvictions.WithLabelValues(s.module).Inc()
	}
}

// Delete removes the entry under key, if any.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[key]; ok {
		before := s.held()
		s.removeLocked(el)
		s.accountLocked(before)
	}
}

// accountLocked moves the bytes gauge by what changed since before. The
// gauge adds rather than sets because the module in service and a shadow
// of its successor can share a name while each holds its own state.
func (s *Store) accountLocked(before int) {
	stateBytes.WithLabelValues(s.module).Add(float64(s.held() - before))
}

func (s *Store) removeLocked(el *list.Element) {
	e := s.lru.Remove(el).(*stateEntry)
	delete(s.entries, e.key)
	s.entries = compacted(s.entries, &s.entriesPeak)
	s.bytes -= e.size()
}

// compacted returns m, or a copy of it once it holds under a quarter of
// its peak. A Go map keeps the slots of the most entries it ever held, so
// a module could otherwise store many small entries, then replace them
// with a few large ones, and leave the host holding slots no budget
// counts. Copying at a quarter costs at most one copy per three removals.
func compacted[V any](m map[string]V, peak *int) map[string]V {
	if len(m) >= *peak/4 {
		return m
	}
	fresh := make(map[string]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	*peak = len(m)
	return fresh
}

// ReleaseClaims ends the claims h still holds when its call ends, so
// that a waiter takes over the fill. The list goes too, rather than
// keeping its capacity for the instance's next call: a call that claimed
// many keys would otherwise hold memory the budget no longer counts.
func (s *Store) ReleaseClaims(h *Holder) {
	if len(h.claims) == 0 {
		return
	}
	s.mu.Lock()
	before := s.held()
	for _, key := range h.claims {
		if c, ok := s.claims[key]; ok && c.holder == h {
			s.endClaimLocked(key, c)
		}
	}
	s.accountLocked(before)
	s.mu.Unlock()
	h.claims = nil
}

// Keys lists the keys of the entries held, in no order, for tools and
// benchmarks that look at what a module keeps.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.entries))
	for key := range s.entries {
		keys = append(keys, key)
	}
	return keys
}

// Clear drops every entry, when the module closes or a tool starts afresh:
// the memory is the operator's, not the module's.
func (s *Store) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.held()
	s.entries, s.bytes, s.entriesPeak = map[string]*list.Element{}, 0, 0
	s.lru.Init()
	s.accountLocked(before)
}

// Metrics go to component-base's legacy registry (RegisterMetrics), which
// the CCM serves on /metrics.
var (
	stateBytes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "state_bytes",
		Help:           "Bytes the module's shared state holds, keys, values and per-entry overhead.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
	stateLookups = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "state_lookups_total",
		Help:           "Shared state reads by result (hit, miss, claimed; _after_wait when another instance's fill was awaited; wait_expired).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module", "result"})
	stateEvictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "wasmccm", Subsystem: "module", Name: "state_evictions_total",
		Help:           "Shared state entries evicted, least recently used first, to stay within the byte budget.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"module"})
)

var registerOnce sync.Once

// RegisterMetrics registers the store's metrics; until then they count
// nothing. It may be called any number of times.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(stateBytes, stateLookups, stateEvictions) })
}
