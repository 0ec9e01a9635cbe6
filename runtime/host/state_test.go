package host

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
)

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
