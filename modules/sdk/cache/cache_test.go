package cache_test

import (
	"context"
	"errors"
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

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	h := &native.Host{}
	listings := 0
	servers := []cache.Item{{ID: "1", Name: "a", Value: []byte(`{"id":1}`)}, {ID: "2", Name: "b", Value: []byte(`{"id":2}`)}}
	s := cache.Snapshot{Host: h, Prefix: "servers", List: func(context.Context) (*cache.Listing, error) {
		listings++
		return &cache.Listing{Items: servers, Derived: map[string][]byte{"count": {byte('0' + len(servers))}}}, nil
	}}
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
	s.List = func(context.Context) (*cache.Listing, error) { return nil, errors.New("page 2: 500") }
	s.Invalidate()
	if _, err := s.ByID(ctx, "1", time.Hour); err == nil || errors.Is(err, cache.ErrNotListed) {
		t.Errorf("failed listing: %v, want its error", err)
	}
}
