package cache_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
)

func TestOnce(t *testing.T) {
	h := &native.Host{}
	fills := 0
	fill := func() ([]byte, error) { fills++; return []byte("v"), nil }
	for range 3 {
		if v, err := cache.Once(h, "k", time.Hour, fill); err != nil || string(v) != "v" {
			t.Fatalf("Once = %q, %v", v, err)
		}
	}
	if fills != 1 {
		t.Errorf("filled %d times within the max age, want 1", fills)
	}
	failing := func() ([]byte, error) { fills++; return nil, errors.New("cloud down") }
	for range 2 {
		if _, err := cache.Once(h, "broken", time.Hour, failing); err == nil {
			t.Fatal("a failed fill answered no error")
		}
	}
	if fills != 3 {
		t.Errorf("a failed fill was kept: %d fills, want 3", fills)
	}
}

// onePage lists items as a single page with their count as derived value.
func onePage(items *[]cache.Item, listings *int) cache.ListFunc {
	return func(context.Context, int) (*cache.Page, error) {
		*listings++
		return &cache.Page{Items: *items, Derived: map[string][]byte{"count": {byte('0' + len(*items))}}, Total: len(*items)}, nil
	}
}

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	h := &native.Host{}
	listings := 0
	servers := []cache.Item{{ID: "1", Name: "a", Value: []byte(`{"id":1}`)}, {ID: "2", Name: "b", Value: []byte(`{"id":2}`)}}
	s := cache.Snapshot{Host: h, Prefix: "servers", List: onePage(&servers, &listings)}
	if v, err := s.ByID(ctx, "1", time.Hour); err != nil || string(v) != `{"id":1}` {
		t.Fatalf("ByID = %q, %v", v, err)
	}
	if v, err := s.ByName(ctx, "b", time.Hour); err != nil || string(v) != `{"id":2}` {
		t.Fatalf("ByName = %q, %v", v, err)
	}
	if _, err := s.ByID(ctx, "3", time.Hour); !errors.Is(err, cache.ErrNotListed) {
		t.Errorf("unlisted ID: %v, want ErrNotListed", err)
	}
	if listings != 1 {
		t.Errorf("%d listings for four lookups, want 1", listings)
	}
	// Server 2 is deleted: the next listing drops it, and its entry of
	// the older listing is not served as if it were current.
	servers = servers[:1]
	s.Invalidate()
	if _, err := s.ByName(ctx, "b", time.Hour); !errors.Is(err, cache.ErrNotListed) {
		t.Errorf("a server of an older listing: %v, want ErrNotListed", err)
	}
	if v, err := s.Derived(ctx, "count", time.Hour); err != nil || string(v) != "1" {
		t.Errorf("Derived = %q, %v", v, err)
	}
	if listings != 2 {
		t.Errorf("%d listings, want 2", listings)
	}
	s.List = func(context.Context, int) (*cache.Page, error) { return nil, errors.New("page 2: 500") }
	s.Invalidate()
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil || errors.Is(err, cache.ErrNotListed) {
		t.Errorf("failed listing: %v, want its error", err)
	}
}

// pagedCloud lists three pages of two servers, failing each page listed
// in fail once, and announcing total.
type pagedCloud struct {
	fetched map[int]int
	fail    map[int]bool
	total   int
}

func (c *pagedCloud) list(_ context.Context, page int) (*cache.Page, error) {
	c.fetched[page]++
	if c.fail[page] {
		delete(c.fail, page)
		return nil, errors.New("429 for page " + strconv.Itoa(page))
	}
	pg := &cache.Page{Total: c.total, Derived: map[string][]byte{"ids": {}}}
	for i := 2*page - 1; i <= 2*page; i++ {
		id := strconv.Itoa(i)
		pg.Items = append(pg.Items, cache.Item{ID: id, Name: "s" + id, Value: []byte(id)})
		pg.Derived["ids"] = append(pg.Derived["ids"], id+" "...)
	}
	if page < 3 {
		pg.Next = page + 1
	}
	return pg, nil
}

// TestSnapshotResumesListing: a listing interrupted on a page resumes
// there at the next lookup instead of reading its first pages again, and
// starts over once it waited longer than ResumeWithin.
func TestSnapshotResumesListing(t *testing.T) {
	ctx := context.Background()
	cloud := &pagedCloud{fetched: map[int]int{}, fail: map[int]bool{3: true}, total: 6}
	s := cache.Snapshot{Host: &native.Host{}, Prefix: "servers", List: cloud.list}
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil {
		t.Fatal("a listing that failed on page 3 answered a lookup")
	}
	if v, err := s.ByName(ctx, "s6", time.Hour); err != nil || string(v) != "6" {
		t.Fatalf("ByName after the resumed listing = %q, %v", v, err)
	}
	if v, err := s.ByID(ctx, "1", time.Hour); err != nil || string(v) != "1" {
		t.Errorf("an item of the interrupted call's pages = %q, %v", v, err)
	}
	if want := map[int]int{1: 1, 2: 1, 3: 2}; !maps.Equal(cloud.fetched, want) {
		t.Errorf("pages fetched %v, want %v (pages 1 and 2 once)", cloud.fetched, want)
	}
	if v, err := s.Derived(ctx, "ids", time.Hour); err != nil || string(v) != "1 2 3 4 5 6 " {
		t.Errorf("Derived over the resumed listing = %q, %v", v, err)
	}

	// Interrupted longer ago than ResumeWithin: listed from page 1 again.
	cloud.fetched, cloud.fail = map[int]int{}, map[int]bool{2: true}
	s.ResumeWithin = time.Millisecond
	s.Invalidate()
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil {
		t.Fatal("a listing that failed on page 2 answered a lookup")
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := s.ByID(ctx, "1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if want := map[int]int{1: 2, 2: 2, 3: 1}; !maps.Equal(cloud.fetched, want) {
		t.Errorf("pages fetched %v, want %v (started over)", cloud.fetched, want)
	}
}

// TestListingShortOfTotal: a listing whose pages hold fewer items than
// the cloud announced is an error, resumed or not, and so is Collect's.
func TestListingShortOfTotal(t *testing.T) {
	ctx := context.Background()
	cloud := &pagedCloud{fetched: map[int]int{}, fail: map[int]bool{2: true}, total: 7}
	s := cache.Snapshot{Host: &native.Host{}, Prefix: "servers", List: cloud.list}
	s.ByID(ctx, "1", time.Hour) // interrupted on page 2
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("resumed listing of 6 items announced as 7: %v, want an error", err)
	}
	if _, err := cache.Collect(ctx, cloud.list); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("Collect of 6 items announced as 7: %v, want an error", err)
	}
	cloud.total = 6
	all, err := cache.Collect(ctx, cloud.list)
	if err != nil || len(all.Items) != 6 || string(all.Derived["ids"]) != "1 2 3 4 5 6 " {
		t.Errorf("Collect = %+v, %v", all, err)
	}
}

// tokenCloud pages the pagedCloud's servers by token, as a query API
// does: page n+1's token is an opaque string the page before names.
type tokenCloud struct {
	*pagedCloud
	tokens []string // the tokens asked for, in order
}

func (c *tokenCloud) list(ctx context.Context, token string) (*cache.Page, error) {
	c.tokens = append(c.tokens, token)
	page := 1
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "opaque-"))
		if err != nil {
			return nil, errors.New("400: bad token " + token)
		}
		page = n
	}
	pg, err := c.pagedCloud.list(ctx, page)
	if err == nil && pg.Next != 0 {
		pg.NextToken, pg.Next = "opaque-"+strconv.Itoa(pg.Next), 0
	}
	return pg, err
}

// TestSnapshotByToken: a listing paged by token is kept as one paged by
// number: resumed after a failure with the failed page's token, checked
// against the announced total, and collected whole; a page naming its own
// token as the next is an error, not a loop.
func TestSnapshotByToken(t *testing.T) {
	ctx := context.Background()
	cloud := &tokenCloud{pagedCloud: &pagedCloud{fetched: map[int]int{}, fail: map[int]bool{3: true}, total: 6}}
	s := cache.Snapshot{Host: &native.Host{}, Prefix: "servers", ListByToken: cloud.list}
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil {
		t.Fatal("a listing that failed on page 3 answered a lookup")
	}
	if v, err := s.ByName(ctx, "s6", time.Hour); err != nil || string(v) != "6" {
		t.Fatalf("ByName after the resumed listing = %q, %v", v, err)
	}
	if v, err := s.Derived(ctx, "ids", time.Hour); err != nil || string(v) != "1 2 3 4 5 6 " {
		t.Errorf("Derived over the resumed listing = %q, %v", v, err)
	}
	if want := []string{"", "opaque-2", "opaque-3", "opaque-3"}; !slices.Equal(cloud.tokens, want) {
		t.Errorf("tokens asked for %q, want %q (resumed at page 3's)", cloud.tokens, want)
	}

	cloud.total = 7
	if _, err := cache.CollectByToken(ctx, cloud.list); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("CollectByToken of 6 items announced as 7: %v, want an error", err)
	}
	cloud.total = 6
	if all, err := cache.CollectByToken(ctx, cloud.list); err != nil || len(all.Items) != 6 {
		t.Errorf("CollectByToken = %+v, %v", all, err)
	}
	loop := func(context.Context, string) (*cache.Page, error) {
		return &cache.Page{Items: []cache.Item{{ID: "1"}}, NextToken: "same", Total: -1}, nil
	}
	calls := 0
	counted := func(ctx context.Context, token string) (*cache.Page, error) {
		calls++
		if calls > 3 {
			t.Fatal("the listing loops on a token that names itself")
		}
		return loop(ctx, token)
	}
	if _, err := cache.CollectByToken(ctx, counted); err == nil || !strings.Contains(err.Error(), "names its own token") {
		t.Errorf("a page naming its own token: %v, want an error", err)
	}
}
