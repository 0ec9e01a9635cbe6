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
// most its own call. Claims are held in the host too, so they count
// against the budget like entries, and together they may take no more
// than one entry may: a module that claims key after key evicts its own
// entries, then is refused claims, and never grows the host.
type sharedState struct {
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
	holder *instance
	done   chan struct{}
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

func newSharedState(module string, budget int) *sharedState {
	return &sharedState{module: module, budget: budget, maxEntry: budget / 4,
		entries: map[string]*list.Element{}, claims: map[string]*stateClaim{}}
}

func (e *stateEntry) size() int { return entrySize(e.key, len(e.value)) }

func entrySize(key string, valueLen int) int { return len(key) + valueLen + stateEntryOverhead }

func claimSize(key string) int { return len(key) + stateClaimOverhead }

// held is what the budget bounds.
func (s *sharedState) held() int { return s.bytes + s.claimed }

// get returns the value under key if it was written at most maxAge ago
// (any age when maxAge is negative). Without one, and with claim, inst
// either takes the key's claim (and is told NotFound: it fills the key) or
// waits for the instance that holds it, then looks again; when the claims
// already take their share of the budget, it is told NotFound without a
// claim. The value returned is never modified afterwards: set replaces it.
// key is only read, during the call, and copied when claimed.
func (s *sharedState) get(ctx context.Context, inst *instance, key []byte, maxAge time.Duration, claim bool) ([]byte, abi.Errno) {
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
		if !held || c.holder == inst {
			result := "claimed"
			if !held && !s.claimLocked(inst, string(key)) {
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

// claimLocked gives inst the claim on key, evicting the least recently
// used entries to make room for it; false when the claims would take more
// than their share.
func (s *sharedState) claimLocked(inst *instance, key string) bool {
	if s.claimed+claimSize(key) > s.maxEntry {
		return false
	}
	before := s.held()
	s.claims[key] = &stateClaim{holder: inst, done: make(chan struct{})}
	s.claimsPeak = max(s.claimsPeak, len(s.claims))
	s.claimed += claimSize(key)
	inst.claims = append(inst.claims, key)
	s.evictLocked()
	s.accountLocked(before)
	return true
}

// endClaimLocked wakes the claim's waiters and gives its bytes back.
func (s *sharedState) endClaimLocked(key string, c *stateClaim) {
	close(c.done)
	delete(s.claims, key)
	s.claims = compacted(s.claims, &s.claimsPeak)
	s.claimed -= claimSize(key)
}

// set stores a copy of value under key, evicting the least recently used
// entries beyond the budget, and ends any claim on key: its waiters find
// the value. The size is checked before the copy, so a value too large
// costs the host nothing.
func (s *sharedState) set(key string, value []byte) abi.Errno {
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
func (s *sharedState) evictLocked() {
	for s.held() > s.budget {
		s.removeLocked(s.lru.Back())
		stateEvictions.WithLabelValues(s.module).Inc()
	}
}

func (s *sharedState) delete(key string) {
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
func (s *sharedState) accountLocked(before int) {
	stateBytes.WithLabelValues(s.module).Add(float64(s.held() - before))
}

func (s *sharedState) removeLocked(el *list.Element) {
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

// releaseClaims ends the claims inst still holds when its call ends, so
// that a waiter takes over the fill. The list goes too, rather than
// keeping its capacity for the instance's next call: a call that claimed
// many keys would otherwise hold memory the budget no longer counts.
func (s *sharedState) releaseClaims(inst *instance) {
	if len(inst.claims) == 0 {
		return
	}
	s.mu.Lock()
	before := s.held()
	for _, key := range inst.claims {
		if c, ok := s.claims[key]; ok && c.holder == inst {
			s.endClaimLocked(key, c)
		}
	}
	s.accountLocked(before)
	s.mu.Unlock()
	inst.claims = nil
}

// clear drops every entry, when the module closes: the memory is the
// operator's, not the module's.
func (s *sharedState) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.held()
	s.entries, s.bytes, s.entriesPeak = map[string]*list.Element{}, 0, 0
	s.lru.Init()
	s.accountLocked(before)
}
