package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmccm/wasmccm/runtime/modulefile"
	"github.com/wasmccm/wasmccm/runtime/oci"
)

// Pulls at start-up are retried for startPullTimeout, then the CCM serves
// the last-known-good module, or exits with the last error and the
// kubelet's restart back-off retries further. It stays below the time the
// Deployment's liveness probe allows before /healthz must answer.
var startPullTimeout = 30 * time.Second

// validateSource checks that exactly one module source is set and that an
// image reference is one the CCM will pull.
func (m *ModuleConfig) validateSource() error {
	switch {
	case m.Path != "" && m.Image != "":
		return errors.New("module.path and module.image exclude each other")
	case m.Path == "" && m.Image == "":
		return errors.New("module.path or module.image is required")
	case m.Image == "" && (m.AllowTags || m.RegistryConfig != "" || m.ImageCacheDir != ""):
		return errors.New("module.allowTags, module.registryConfig and module.imageCacheDir need module.image")
	case m.Image != "" && m.ImageCacheDir == "":
		return errors.New("module.image needs module.imageCacheDir")
	case m.Image != "":
		if _, err := oci.ParseReference(m.Image, m.AllowTags); err != nil {
			return fmt.Errorf("module.image: %w", err)
		}
	}
	return nil
}

// image is module.image with its settings.
func (m *ModuleConfig) image() modulefile.Image {
	return modulefile.Image{Ref: m.Image, AllowTags: m.AllowTags, RegistryConfig: m.RegistryConfig, CacheDir: m.ImageCacheDir}
}

// useImage pulls module.image, if set, and points module.path at the
// installed file (modulefile.Pull). With hot reload on and reread given,
// the cloud-config is then polled for a changed module.image
// (modulefile.Follow), which also retries a pull that failed at start
// while the last-known-good module serves.
func useImage(ctx context.Context, cfg *Config, reread func() (*Config, error)) error {
	if cfg.Module.Image == "" {
		return nil
	}
	im := cfg.Module.image()
	cfg.Module.Path = im.ServedPath()
	digest, err := modulefile.Pull(ctx, im, startPullTimeout)
	if reread != nil && cfg.Module.ReloadInterval.Duration > 0 {
		current := im.Ref
		if err != nil {
			current = ""
		}
		configured := func() (modulefile.Image, error) {
			cfg, err := reread()
			if err != nil {
				return modulefile.Image{}, fmt.Errorf("re-reading the cloud-config for module.image: %w", err)
			}
			return cfg.Module.image(), nil
		}
		go modulefile.Follow(ctx, configured, current, digest, im.ServedPath(), cfg.Module.ReloadInterval.Duration)
	}
	return err
}
