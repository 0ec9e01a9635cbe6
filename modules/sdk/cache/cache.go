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
	"slices"
	"strconv"
	"strings"
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

// Page is one page of a listing.
type Page struct {
	Items []Item
	// Derived are values computed from the listing that a provider reads
	// whole, such as a map of private addresses to server names: each
	// page's are appended to the same keys' of the pages before, and
	// Snapshot.Derived returns the whole listing's.
	Derived map[string][]byte
	// Next is the number of the page to ask for next; 0 after the last.
	Next int
	// NextToken is, for a listing paged by token (TokenListFunc), the
	// token to ask for the next page with; "" after the last.
	NextToken string
	// Total is how many items the cloud announced for the whole listing,
	// or -1 when it announces none. The last page's is checked against
	// the items listed: a listing that ends short is an error, because
	// what it lacks would look absent.
	Total int
}

// ListFunc fetches one page of a listing; the first is page 1. It
// returns an error rather than a page it could not read whole.
type ListFunc func(ctx context.Context, page int) (*Page, error)

// TokenListFunc fetches one page of a listing that pages by token, as
// query APIs do (NextToken) and cursor-paged ones: the first with token "",
// each next one with the page before's NextToken. It returns an error
// rather than a page it could not read whole.
type TokenListFunc func(ctx context.Context, token string) (*Page, error)

// pager fetches the pages of a listing paged by number or by token,
// whichever is set.
type pager struct {
	byNumber ListFunc
	byToken  TokenListFunc
}

// cursor is where a listing goes on: the number of the page (counted
// from 1 for a listing paged by token too, for the progress and errors)
// and, paged by token, its token. Page 0 is past the last.
type cursor struct {
	page  int
	token string
}

func (p pager) fetch(ctx context.Context, c cursor) (*Page, error) {
	if p.byToken != nil {
		return p.byToken(ctx, c.token)
	}
	return p.byNumber(ctx, c.page)
}

// next is the cursor of the page after pg, read at c.
func (p pager) next(c cursor, pg *Page) (cursor, error) {
	if p.byToken != nil {
		if pg.NextToken != "" && pg.NextToken == c.token {
			return cursor{}, errors.New("cache: page " + strconv.Itoa(c.page) + " of the listing names its own token as the next")
		}
		if pg.NextToken == "" {
			return cursor{}, nil
		}
		return cursor{page: c.page + 1, token: pg.NextToken}, nil
	}
	if pg.Next != 0 && pg.Next <= c.page {
		return cursor{}, errors.New("cache: page " + strconv.Itoa(c.page) + " of the listing names page " + strconv.Itoa(pg.Next) + " as the next")
	}
	return cursor{page: pg.Next}, nil
}

// Collect reads every page of list in one go and returns them as one
// page, keeping nothing: for a provider whose snapshot is switched off.
func Collect(ctx context.Context, list ListFunc) (*Page, error) {
	return collect(ctx, pager{byNumber: list})
}

// CollectByToken is Collect for a listing paged by token.
func CollectByToken(ctx context.Context, list TokenListFunc) (*Page, error) {
	return collect(ctx, pager{byToken: list})
}

func collect(ctx context.Context, p pager) (*Page, error) {
	all := &Page{Derived: map[string][]byte{}}
	err := readPages(ctx, p, cursor{page: 1}, 0, func(pg *Page, _ cursor, _ int) error {
		all.Items = append(all.Items, pg.Items...)
		for k, v := range pg.Derived {
			all.Derived[k] = append(all.Derived[k], v...)
		}
		return nil
	})
	return all, err
}

// readPages reads the listing from the cursor at on, with listed items
// already read before it, handing each page to keep with the cursor of
// the next (page 0 after the last) and the items read so far; the last
// page's Total must match the items read.
func readPages(ctx context.Context, p pager, at cursor, listed int, keep func(pg *Page, next cursor, listed int) error) error {
	for {
		pg, err := p.fetch(ctx, at)
		if err != nil {
			return err
		}
		if pg == nil {
			return errors.New("cache: the listing returned no page " + strconv.Itoa(at.page))
		}
		listed += len(pg.Items)
		next, err := p.next(at, pg)
		if err != nil {
			return err
		}
		if next.page == 0 && pg.Total >= 0 && pg.Total != listed {
			return errors.New("cache: the cloud announced " + strconv.Itoa(pg.Total) + " items and listed " +
				strconv.Itoa(listed) + "; the listing is incomplete")
		}
		if err := keep(pg, next, listed); err != nil {
			return err
		}
		if next.page == 0 {
			return nil
		}
		at = next
	}
}

// Snapshot serves lookups from the newest complete listing of one kind of
// object. Its entries live in the host's shared state under Prefix: the
// listing's generation under Prefix itself, each item under
// Prefix/id/ID, each name under Prefix/name/NAME, each derived value under
// Prefix/derived/KEY, all stamped with the generation, so a lookup never
// mixes two listings.
//
// A listing of many pages may not fit in one call: under a rate budget
// shared with other calls (http.rateLimits), 20 pages can take longer
// than a call's deadline. So each page is kept as it arrives, with the
// listing's progress under Prefix/listing, and the next call to need
// the snapshot resumes where the last one stopped, as long as it stopped
// at most ResumeWithin ago. Without that, every attempt would spend the
// same first pages of the cloud's quota again and the listing might never
// end. The cost: a listing's items may be as old as the listing took.
type Snapshot struct {
	Host sdk.Host
	// Prefix names the snapshot, e.g. "servers".
	Prefix string
	// List fetches one page of the listing, by number; ListByToken, set
	// instead, by token.
	List        ListFunc
	ListByToken TokenListFunc
	// ResumeWithin is how long an interrupted listing may wait for a
	// call to resume it before it starts over; one minute when zero.
	ResumeWithin time.Duration
}

// defaultResumeWithin is Snapshot.ResumeWithin's default.
const defaultResumeWithin = time.Minute

// ErrNotListed reports an object that the snapshot does not hold: it may
// exist all the same. Confirm with a direct read.
var ErrNotListed = errors.New("cache: not in the snapshot")

// generation returns the generation of a listing at most maxAge old,
// listing anew (once across instances) when there is none.
func (s *Snapshot) generation(ctx context.Context, maxAge time.Duration) (string, error) {
	if s.Host == nil || s.List == nil && s.ListByToken == nil {
		return "", errors.New("cache: snapshot " + strconv.Quote(s.Prefix) + " has no Host or List: the provider is not initialized")
	}
	gen, err := Once(s.Host, s.Prefix, maxAge, func() ([]byte, error) { return s.fill(ctx) })
	return string(gen), err
}

// progress is an unfinished listing: its generation, the next page (and
// its token), the items listed so far, and the derived keys accumulated
// under Prefix/listing/derived/KEY.
type progress struct {
	gen     string
	next    cursor
	listed  int
	derived []string
}

func (p progress) encode() []byte {
	return []byte(strings.Join(append([]string{p.gen, strconv.Itoa(p.next.page), p.next.token, strconv.Itoa(p.listed)}, p.derived...), "\x00"))
}

func decodeProgress(v []byte) (progress, bool) {
	f := strings.Split(string(v), "\x00")
	if len(f) < 4 {
		return progress{}, false
	}
	next, err1 := strconv.Atoi(f[1])
	listed, err2 := strconv.Atoi(f[3])
	if f[0] == "" || err1 != nil || err2 != nil || next < 1 {
		return progress{}, false
	}
	return progress{gen: f[0], next: cursor{page: next, token: f[2]}, listed: listed, derived: f[4:]}, true
}

// fill lists, resuming an interrupted listing, and returns the new
// generation once the last page is kept. It runs only while holding the
// claim on Prefix, so one instance at a time writes the progress.
func (s *Snapshot) fill(ctx context.Context) ([]byte, error) {
	progressKey := s.Prefix + "/listing"
	p, ok := progress{}, false
	if v, found := s.Host.StateGet(progressKey, orDefault(s.ResumeWithin, defaultResumeWithin), false); found {
		p, ok = decodeProgress(v)
	}
	if !ok {
		p = progress{gen: strconv.FormatInt(time.Now().UnixNano(), 36), next: cursor{page: 1}}
	}
	buf := make([]byte, 0, 512)
	// The buffer keeps its growth, so values larger than it start with
	// cost one allocation per fill, not one each.
	stamp := func(v []byte) []byte {
		buf = append(append(append(buf[:0], p.gen...), 0), v...)
		return buf
	}
	keep := func(key string, v []byte) error {
		if err := s.Host.StateSet(key, v); err != nil {
			return errors.New("cache: keeping " + key + ": " + err.Error())
		}
		return nil
	}
	accumulated := func(key string) []byte {
		v, _ := s.entry(progressKey+"/derived/"+key, p.gen)
		return v
	}
	// Joined once: a toolchain may join three strings in two allocations,
	// and a module without a collector keeps each.
	idKeys, nameKeys := s.Prefix+"/id/", s.Prefix+"/name/"
	err := readPages(ctx, pager{byNumber: s.List, byToken: s.ListByToken}, p.next, p.listed, func(pg *Page, next cursor, listed int) error {
		for _, it := range pg.Items {
			if err := keep(idKeys+it.ID, stamp(it.Value)); err != nil {
				return err
			}
			if it.Name != "" {
				if err := keep(nameKeys+it.Name, append(stamp(nil), it.ID...)); err != nil {
					return err
				}
			}
		}
		for key, v := range pg.Derived {
			if !slices.Contains(p.derived, key) {
				p.derived = append(p.derived, key)
			}
			if err := keep(progressKey+"/derived/"+key, stamp(append(accumulated(key), v...))); err != nil {
				return err
			}
		}
		p.next, p.listed = next, listed
		if next.page == 0 {
			return nil
		}
		return keep(progressKey, p.encode())
	})
	if err != nil {
		return nil, err
	}
	for _, key := range p.derived {
		if err := keep(s.Prefix+"/derived/"+key, stamp(accumulated(key))); err != nil {
			return nil, err
		}
		s.Host.StateDelete(progressKey + "/derived/" + key)
	}
	s.Host.StateDelete(progressKey)
	return []byte(p.gen), nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
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

// Invalidate drops the listing, and any listing under way, after a write
// that changes what it holds: the next lookup lists again from the start.
func (s *Snapshot) Invalidate() {
	s.Host.StateDelete(s.Prefix)
	s.Host.StateDelete(s.Prefix + "/listing")
}
