package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/wasmccm/wasmccm/runtime/oci/imageref"
)

// Cache keeps pulled modules on disk by artifact digest, so that a module
// named by digest is fetched once: after a restart, or while the registry
// is down, it is served from the cache. Each entry is a directory
// <Dir>/sha256-<hex> holding the manifest and the module, checked against
// each other and against the digest on every read.
type Cache struct {
	Dir string
	Options
}

// Fetch returns the module ref names, from the cache when ref names a
// digest that is there (no registry access), else pulled and stored. A tag
// is always resolved at the registry, but a module already cached under
// the digest it resolves to is not fetched again.
func (c *Cache) Fetch(ctx context.Context, ref string) (*Module, error) {
	r, err := imageref.Parse(ref, c.AllowTags)
	if err != nil {
		return nil, err
	}
	if d, ok := r.(name.Digest); ok {
		if m, err := c.read(d.DigestStr()); err == nil {
			return m, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			// A damaged entry is replaced by a fresh pull.
			_ = os.RemoveAll(c.entry(d.DigestStr()))
		}
	}
	m, manifest, err := pull(ctx, r, c.Options, func(digest string) (*Module, bool) {
		m, err := c.read(digest)
		return m, err == nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.write(m, manifest); err != nil {
		return nil, fmt.Errorf("caching %s: %w", ref, err)
	}
	return m, nil
}

// FetchRetrying is Fetch, retried with exponential backoff from first to
// at most max between attempts until it succeeds or ctx ends. Each failure
// is reported to onError with the wait before the next attempt.
func (c *Cache) FetchRetrying(ctx context.Context, ref string, first, max time.Duration, onError func(err error, retryIn time.Duration)) (*Module, error) {
	wait := first
	for {
		m, err := c.Fetch(ctx, ref)
		if err == nil || errors.Is(err, imageref.ErrTagRefused) {
			return m, err
		}
		if onError != nil {
			onError(err, wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %v)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, max)
	}
}

// Path returns the module file of a cached artifact.
func (c *Cache) Path(digest string) string { return filepath.Join(c.entry(digest), "module.wasm") }

func (c *Cache) entry(digest string) string {
	return filepath.Join(c.Dir, strings.Replace(digest, ":", "-", 1))
}

func (c *Cache) read(digest string) (*Module, error) {
	manifest, err := os.ReadFile(filepath.Join(c.entry(digest), "manifest.json"))
	if err != nil {
		return nil, err
	}
	if got := sha256Digest(manifest); got != digest {
		return nil, fmt.Errorf("cached manifest has digest %s, want %s", got, digest)
	}
	var m v1.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil || len(m.Layers) != 1 {
		return nil, fmt.Errorf("cached manifest %s is not a Wasm artifact", digest)
	}
	wasm, err := os.ReadFile(c.Path(digest))
	if err != nil {
		return nil, err
	}
	if got := sha256Digest(wasm); got != m.Layers[0].Digest.String() {
		return nil, fmt.Errorf("cached module has digest %s, want %s", got, m.Layers[0].Digest)
	}
	return &Module{Digest: digest, LayerDigest: m.Layers[0].Digest.String(), Wasm: wasm}, nil
}

// write stores an entry under a temporary name and renames it into place,
// so that a crash never leaves a half-written entry.
func (c *Cache) write(m *Module, manifest []byte) error {
	final := c.entry(m.Digest)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.Dir, ".pull-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), manifest, 0o444); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "module.wasm"), m.Wasm, 0o444); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // stored concurrently
		}
		return err
	}
	return nil
}
