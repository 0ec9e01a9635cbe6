package sharedstate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

func TestSharedStateBudget(t *testing.T) {
	s := New("t", 4*(stateEntryOverhead+100))
	value := strings.Repeat("v", 98) // key "kN", 98 bytes and the overhead fill a quarter
	for _, key := range []string{"k1", "k2", "k3", "k4"} {
		if e := s.Set(key, []byte(value)); e != 0 {
			t.Fatalf("set %s: %v", key, e)
		}
	}
	if _, e := s.Get(context.Background(), nil, []byte("k1"), -1, false); e != 0 { // k1 is now the most recently used
		t.Fatalf("k1 missing before the budget is exceeded: %v", e)
	}
	if e := s.Set("k5", []byte(value)); e != 0 {
		t.Fatal(e)
	}
	if _, e := s.Get(context.Background(), nil, []byte("k2"), -1, false); e != abi.ErrnoNotFound {
		t.Errorf("k2, the least recently used, was not evicted: %v", e)
	}
	for _, key := range []string{"k1", "k3", "k4", "k5"} {
		if _, e := s.Get(context.Background(), nil, []byte(key), -1, false); e != 0 {
			t.Errorf("%s evicted: %v", key, e)
		}
	}
	if s.bytes > s.budget {
		t.Errorf("holds %d bytes, budget %d", s.bytes, s.budget)
	}
	if e := s.Set("big", make([]byte, s.maxEntry)); e != abi.ErrnoTooLarge {
		t.Errorf("an entry over a quarter of the budget: %v, want ErrnoTooLarge", e)
	}
	s.Set("k1", []byte("short"))
	s.Delete("k3")
	want := 0
	for _, el := range s.entries {
		want += el.Value.(*stateEntry).size()
	}
	if s.bytes != want {
		t.Errorf("bytes = %d, entries add up to %d", s.bytes, want)
	}
	s.Clear()
	if s.bytes != 0 || len(s.entries) != 0 || s.lru.Len() != 0 {
		t.Errorf("after clear: %d bytes, %d entries", s.bytes, len(s.entries))
	}
}

func TestSharedStateMaxAge(t *testing.T) {
	s := New("t", 8<<20)
	s.Set("k", []byte("v"))
	time.Sleep(20 * time.Millisecond)
	for _, tc := range []struct {
		maxAge time.Duration
		want   abi.Errno
	}{{-1, 0}, {time.Hour, 0}, {time.Millisecond, abi.ErrnoNotFound}} {
		if _, e := s.Get(context.Background(), nil, []byte("k"), tc.maxAge, false); e != tc.want {
			t.Errorf("max age %v: %v, want %v", tc.maxAge, e, tc.want)
		}
	}
}

// TestSharedStateClaims: one instance fills, the others wait for it; a
// holder whose call ends without filling hands the claim on.
func TestSharedStateClaims(t *testing.T) {
	s := New("t", 8<<20)
	filler, waiter := &Holder{}, &Holder{}
	ctx := context.Background()
	if _, e := s.Get(ctx, filler, []byte("k"), time.Minute, true); e != abi.ErrnoNotFound || len(filler.claims) != 1 {
		t.Fatalf("first claim: %v, claims %v", e, filler.claims)
	}
	if _, e := s.Get(ctx, filler, []byte("k"), time.Minute, true); e != abi.ErrnoNotFound || len(filler.claims) != 1 {
		t.Fatalf("the holder asking again: %v, claims %v", e, filler.claims)
	}
	got := make(chan string)
	go func() {
		v, _ := s.Get(ctx, waiter, []byte("k"), time.Minute, true)
		got <- string(v)
	}()
	select {
	case v := <-got:
		t.Fatalf("the waiter did not wait: %q", v)
	case <-time.After(50 * time.Millisecond):
	}
	s.Set("k", []byte("filled"))
	if v := <-got; v != "filled" {
		t.Errorf("waiter got %q", v)
	}
	s.ReleaseClaims(filler)

	// A holder that gives up: its call ends, the waiter takes the claim.
	if _, e := s.Get(ctx, filler, []byte("j"), time.Minute, true); e != abi.ErrnoNotFound {
		t.Fatal(e)
	}
	go func() {
		_, e := s.Get(ctx, waiter, []byte("j"), time.Minute, true)
		got <- e.Error()
	}()
	time.Sleep(20 * time.Millisecond)
	s.ReleaseClaims(filler)
	select {
	case msg := <-got:
		if msg != abi.ErrnoNotFound.Error() || len(waiter.claims) != 1 {
			t.Errorf("waiter: %s, claims %v; want NotFound and the claim", msg, waiter.claims)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not released when the holder's call ended")
	}
	s.ReleaseClaims(waiter)

	// A waiter whose deadline passes stops waiting.
	s.Get(ctx, filler, []byte("d"), time.Minute, true)
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, e := s.Get(short, waiter, []byte("d"), time.Minute, true); e != abi.ErrnoNotFound || len(waiter.claims) != 0 {
		t.Errorf("expired waiter: %v, claims %v", e, waiter.claims)
	}
}
