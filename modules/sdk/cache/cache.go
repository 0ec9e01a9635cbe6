// Package cache keeps what a provider learned of its cloud across calls
// and instances, in the host's shared state (sdk.Host.StateGet and
// StateSet). A module's instances are stateless and recycled every few
// calls, so anything a provider keeps in its own variables is soon lost;
// the host's state outlives them, is shared by all of a module's
// instances, is bounded by the operator, and starts empty for every new
// module.
//
// Once fills one value at most once per max age across all instances.
// Snapshot keeps a complete listing of one kind of cloud object (all
// servers, say) and answers lookups by ID and name from it, as native
// cloud-controller-managers do to stay within their cloud's rate limit.
//
// A snapshot can only say what the cloud listed at one moment. An object
// missing from it may have been created since, or the listing may have
// missed it; so Snapshot reports a miss as "not in the listing", never as
// "does not exist", and the provider must confirm absence with a direct
// read before any answer that deletes something.
package cache

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Once returns the value stored under key when it is at most maxAge old.
// Otherwise one caller among all the module's instances runs fill and
// stores what it returns, while the others asking for key wait for that
// value instead of filling it too. An error from fill is returned and
// nothing is stored, so the next caller tries again; the waiters take over
// when the failed caller's call ends.
func Once(h sdk.Host, key string, maxAge time.Duration, fill func() ([]byte, error)) ([]byte, error) {
	if v, ok := h.StateGet(key, maxAge, true); ok {
		return v, nil
	}
	v, err := fill()
	if err != nil {
		return nil, err
	}
	// A value too large to keep is still the answer to this call.
	_ = h.StateSet(key, v)
	return v, nil
}

// Item is one object of a listing: its ID, its name (may be empty) and
// its encoding, which the provider chooses and decodes itself.
type Item struct {
	ID, Name string
	Value    []byte
}

// Listing is the result of one complete listing.
type Listing struct {
	Items []Item
	// Derived are values computed from the same listing that a provider
	// reads whole, such as a map of private addresses to server names;
	// Snapshot.Derived returns them.
	Derived map[string][]byte
}

// Snapshot serves lookups from the newest complete listing of one kind of
// object. Its entries live in the host's shared state under Prefix: the
// listing's generation under Prefix itself, each item under
// Prefix/id/ID, each name under Prefix/name/NAME, each derived value under
// Prefix/derived/KEY, all stamped with the generation, so a lookup never
// mixes two listings.
type Snapshot struct {
	Host sdk.Host
	// Prefix names the snapshot, e.g. "servers".
	Prefix string
	// List fetches every object. It must return an error rather than a
	// partial listing: what a listing lacks is what the provider will ask
	// the cloud about directly.
	List func(ctx context.Context) (*Listing, error)
}

// ErrNotListed reports an object that the snapshot does not hold: it may
// exist all the same. Confirm with a direct read.
var ErrNotListed = errors.New("cache: not in the snapshot")

// generation returns the generation of a listing at most maxAge old,
// listing anew (once across instances) when there is none.
func (s *Snapshot) generation(ctx context.Context, maxAge time.Duration) (string, error) {
	if s.Host == nil || s.List == nil {
		return "", errors.New("cache: snapshot " + strconv.Quote(s.Prefix) + " has no Host or List: the provider is not initialized")
	}
	gen, err := Once(s.Host, s.Prefix, maxAge, func() ([]byte, error) { return s.fill(ctx) })
	return string(gen), err
}

func (s *Snapshot) fill(ctx context.Context) ([]byte, error) {
	listing, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	gen := strconv.FormatInt(time.Now().UnixNano(), 36)
	buf := make([]byte, 0, 512)
	stamp := func(v []byte) []byte { return append(append(append(buf[:0], gen...), 0), v...) }
	for _, it := range listing.Items {
		if err := s.Host.StateSet(s.Prefix+"/id/"+it.ID, stamp(it.Value)); err != nil {
			return nil, errors.New("cache: keeping " + s.Prefix + " " + it.ID + ": " + err.Error())
		}
		if it.Name != "" {
			if err := s.Host.StateSet(s.Prefix+"/name/"+it.Name, stamp([]byte(it.ID))); err != nil {
				return nil, errors.New("cache: keeping " + s.Prefix + " " + it.Name + ": " + err.Error())
			}
		}
	}
	for key, v := range listing.Derived {
		if err := s.Host.StateSet(s.Prefix+"/derived/"+key, stamp(v)); err != nil {
			return nil, errors.New("cache: keeping " + s.Prefix + " " + key + ": " + err.Error())
		}
	}
	return []byte(gen), nil
}

// entry reads key and returns its value when it belongs to generation gen.
func (s *Snapshot) entry(key, gen string) ([]byte, bool) {
	v, ok := s.Host.StateGet(key, -1, false)
	if !ok || len(v) <= len(gen) || string(v[:len(gen)]) != gen || v[len(gen)] != 0 {
		return nil, false
	}
	return v[len(gen)+1:], true
}

// ByID returns the object with id from a listing at most maxAge old, or
// ErrNotListed.
func (s *Snapshot) ByID(ctx context.Context, id string, maxAge time.Duration) ([]byte, error) {
	gen, err := s.generation(ctx, maxAge)
	if err != nil {
		return nil, err
	}
	if v, ok := s.entry(s.Prefix+"/id/"+id, gen); ok {
		return v, nil
	}
	return nil, ErrNotListed
}

// ByName returns the object named name from a listing at most maxAge old,
// or ErrNotListed.
func (s *Snapshot) ByName(ctx context.Context, name string, maxAge time.Duration) ([]byte, error) {
	gen, err := s.generation(ctx, maxAge)
	if err != nil {
		return nil, err
	}
	if id, ok := s.entry(s.Prefix+"/name/"+name, gen); ok {
		if v, ok := s.entry(s.Prefix+"/id/"+string(id), gen); ok {
			return v, nil
		}
	}
	return nil, ErrNotListed
}

// Derived returns the derived value key of a listing at most maxAge old.
// A listing that did not derive it, or whose entry was evicted, is
// ErrNotListed.
func (s *Snapshot) Derived(ctx context.Context, key string, maxAge time.Duration) ([]byte, error) {
	gen, err := s.generation(ctx, maxAge)
	if err != nil {
		return nil, err
	}
	if v, ok := s.entry(s.Prefix+"/derived/"+key, gen); ok {
		return v, nil
	}
	return nil, ErrNotListed
}

// Invalidate drops the listing, after a write that changes what it holds:
// the next lookup lists again.
func (s *Snapshot) Invalidate() { s.Host.StateDelete(s.Prefix) }
