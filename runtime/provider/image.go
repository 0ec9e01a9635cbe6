package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// Pulls at start-up are retried for startPullTimeout, then the CCM serves
// the last-known-good module, or exits with the last error and the
// kubelet's restart back-off retries further. It stays below the time the
// Deployment's liveness probe allows before /healthz must answer.
var startPullTimeout = 30 * time.Second

// moduleImage is module.image with its settings.
func moduleImage(m *cloudconfig.Module) modulefile.Image {
	return modulefile.Image{Ref: m.Image, AllowTags: m.AllowTags, RegistryConfig: m.RegistryConfig, CacheDir: m.ImageCacheDir}
}

// useImage pulls module.image, if set, and points module.path at the
// installed file (modulefile.Pull). With hot reload on and reread given,
// the cloud-config is then polled for a changed module.image
// (modulefile.Follow), which also retries a pull that failed at start
// while the last-known-good module serves.
func useImage(ctx context.Context, cfg *cloudconfig.Config, reread func() (*cloudconfig.Config, error)) error {
	if cfg.Module.Image == "" {
		return nil
	}
	im := moduleImage(&cfg.Module)
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
			return moduleImage(&cfg.Module), nil
		}
		go modulefile.Follow(ctx, configured, current, digest, im.ServedPath(), cfg.Module.ReloadInterval.Duration)
	}
	return err
}
