package host

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

func TestSharedStateBudget(t *testing.T) {
	s := newSharedState("t", 4*(stateEntryOverhead+100))
	value := strings.Repeat("v", 98) // key "kN", 98 bytes and the overhead fill a quarter
	for _, key := range []string{"k1", "k2", "k3", "k4"} {
		if e := s.set(key, []byte(value)); e != 0 {
			t.Fatalf("set %s: %v", key, e)
		}
	}
	if _, e := s.get(context.Background(), nil, []byte("k1"), -1, false); e != 0 { // k1 is now the most recently used
		t.Fatalf("k1 missing before the budget is exceeded: %v", e)
	}
	if e := s.set("k5", []byte(value)); e != 0 {
		t.Fatal(e)
	}
	if _, e := s.get(context.Background(), nil, []byte("k2"), -1, false); e != abi.ErrnoNotFound {
		t.Errorf("k2, the least recently used, was not evicted: %v", e)
	}
	for _, key := range []string{"k1", "k3", "k4", "k5"} {
		if _, e := s.get(context.Background(), nil, []byte(key), -1, false); e != 0 {
			t.Errorf("%s evicted: %v", key, e)
		}
	}
	if s.bytes > s.budget {
		t.Errorf("holds %d bytes, budget %d", s.bytes, s.budget)
	}
	if e := s.set("big", make([]byte, s.maxEntry)); e != abi.ErrnoTooLarge {
		t.Errorf("an entry over a quarter of the budget: %v, want ErrnoTooLarge", e)
	}
	s.set("k1", []byte("short"))
	s.delete("k3")
	want := 0
	for _, el := range s.entries {
		want += el.Value.(*stateEntry).size()
	}
	if s.bytes != want {
		t.Errorf("bytes = %d, entries add up to %d", s.bytes, want)
	}
	s.clear()
	if s.bytes != 0 || len(s.entries) != 0 || s.lru.Len() != 0 {
		t.Errorf("after clear: %d bytes, %d entries", s.bytes, len(s.entries))
	}
}

func TestSharedStateMaxAge(t *testing.T) {
	s := newSharedState("t", DefaultSharedStateBytes)
	s.set("k", []byte("v"))
	time.Sleep(20 * time.Millisecond)
	for _, tc := range []struct {
		maxAge time.Duration
		want   abi.Errno
	}{{-1, 0}, {time.Hour, 0}, {time.Millisecond, abi.ErrnoNotFound}} {
		if _, e := s.get(context.Background(), nil, []byte("k"), tc.maxAge, false); e != tc.want {
			t.Errorf("max age %v: %v, want %v", tc.maxAge, e, tc.want)
		}
	}
}

// TestSharedStateClaims: one instance fills, the others wait for it; a
// holder whose call ends without filling hands the claim on.
func TestSharedStateClaims(t *testing.T) {
	s := newSharedState("t", DefaultSharedStateBytes)
	filler, waiter := &instance{}, &instance{}
	ctx := context.Background()
	if _, e := s.get(ctx, filler, []byte("k"), time.Minute, true); e != abi.ErrnoNotFound || len(filler.claims) != 1 {
		t.Fatalf("first claim: %v, claims %v", e, filler.claims)
	}
	if _, e := s.get(ctx, filler, []byte("k"), time.Minute, true); e != abi.ErrnoNotFound || len(filler.claims) != 1 {
		t.Fatalf("the holder asking again: %v, claims %v", e, filler.claims)
	}
	got := make(chan string)
	go func() {
		v, _ := s.get(ctx, waiter, []byte("k"), time.Minute, true)
		got <- string(v)
	}()
	select {
	case v := <-got:
		t.Fatalf("the waiter did not wait: %q", v)
	case <-time.After(50 * time.Millisecond):
	}
	s.set("k", []byte("filled"))
	if v := <-got; v != "filled" {
		t.Errorf("waiter got %q", v)
	}
	s.releaseClaims(filler)

	// A holder that gives up: its call ends, the waiter takes the claim.
	if _, e := s.get(ctx, filler, []byte("j"), time.Minute, true); e != abi.ErrnoNotFound {
		t.Fatal(e)
	}
	go func() {
		_, e := s.get(ctx, waiter, []byte("j"), time.Minute, true)
		got <- e.Error()
	}()
	time.Sleep(20 * time.Millisecond)
	s.releaseClaims(filler)
	select {
	case msg := <-got:
		if msg != abi.ErrnoNotFound.Error() || len(waiter.claims) != 1 {
			t.Errorf("waiter: %s, claims %v; want NotFound and the claim", msg, waiter.claims)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not released when the holder's call ended")
	}
	s.releaseClaims(waiter)

	// A waiter whose deadline passes stops waiting.
	s.get(ctx, filler, []byte("d"), time.Minute, true)
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, e := s.get(short, waiter, []byte("d"), time.Minute, true); e != abi.ErrnoNotFound || len(waiter.claims) != 0 {
		t.Errorf("expired waiter: %v, claims %v", e, waiter.claims)
	}
}

// TestSharedStateInModules runs the state imports from real modules: a
// value outlives the call and the instance that wrote it, concurrent
// fills of one key run once, and a new module starts empty.
func TestSharedStateInModules(t *testing.T) {
	master := func(f *fixture, name string) (string, error) {
		var out abi.String
		in := abi.String(name)
		err := f.mod.Call(context.Background(), abi.ExportClusterMaster, &in, &out)
		return string(out), err
	}
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, func(c *Config) { c.PoolSize = 3 })
			if _, err := master(f, "state-set:zone=fsn1"); err != nil {
				t.Fatal(err)
			}
			// Three concurrent calls: whichever instances serve them, they
			// read what another wrote.
			var wg sync.WaitGroup
			got := make([]string, 3)
			for i := range got {
				wg.Go(func() { got[i], _ = master(f, "state-get:zone") })
			}
			wg.Wait()
			for i, v := range got {
				if v != "fsn1" {
					t.Errorf("reader %d got %q", i, v)
				}
			}
			var status *StatusError
			if _, err := master(f, "state-get:never-set"); !errors.As(err, &status) || status.Status != abi.StatusNotFound {
				t.Errorf("absent key: %v", err)
			}

			for i := range got {
				wg.Go(func() {
					var err error
					if got[i], err = master(f, "state-once:snapshot"); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if got[0] == "" || got[0] != got[1] || got[1] != got[2] {
				t.Errorf("concurrent fills answered %q: want one value, filled once", got)
			}

			next := newFixture(t, tc, func(c *Config) { c.PoolSize = 3; c.Name = f.mod.Name() })
			if v, err := master(next, "state-get:zone"); !errors.As(err, &status) || status.Status != abi.StatusNotFound {
				t.Errorf("a new module read the old one's state: %q, %v", v, err)
			}
		})
	}
}
