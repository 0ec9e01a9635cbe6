package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/oci"
)

// A module named by module.image is pulled from its registry into the
// cache directory and installed there as one file, servedModuleFile, which
// becomes module.path. Everything after that, the sha256 and signature
// checks, loading and hot reload with its rollout, is the path a module
// file in a ConfigMap takes: the image source only decides which bytes are
// in that file.
const servedModuleFile = "module.wasm"

// Pulls at start-up are retried for startPullTimeout, then the CCM exits
// with the last error and the kubelet's restart back-off retries further.
// It stays below the time the Deployment's liveness probe allows before
// /healthz must answer.
var startPullTimeout = 30 * time.Second

const (
	startPullFirstTry = time.Second
	startPullMaxWait  = 8 * time.Second
	// refPullTimeout bounds one pull of a changed reference.
	refPullTimeout = 2 * time.Minute
)

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

// imageCache is the pull cache module.image uses.
func (m *ModuleConfig) imageCache() *oci.Cache {
	c := &oci.Cache{Dir: m.ImageCacheDir, Options: oci.Options{AllowTags: m.AllowTags}}
	if m.RegistryConfig != "" {
		c.Keychain = oci.DockerConfigKeychain(m.RegistryConfig)
	}
	return c
}

// useImage pulls module.image, if set, and points module.path at the
// installed file. Pulls are retried for startPullTimeout, each failure
// logged. With hot reload on and the cloud-config's path known, the
// cloud-config is then polled for a changed module.image (see
// watchImageReference), and a failed pull is retried there while the
// last-known-good module serves, if there is one.
func useImage(ctx context.Context, cfg *Config, cloudConfigPath string) error {
	ref := cfg.Module.Image
	if ref == "" {
		return nil
	}
	served := filepath.Join(cfg.Module.ImageCacheDir, servedModuleFile)
	cfg.Module.Path = served
	watch := func(current, currentDigest string) {
		if cloudConfigPath != "" && cfg.Module.ReloadInterval.Duration > 0 {
			go watchImageReference(ctx, cloudConfigPath, current, currentDigest, served, cfg.Module.ReloadInterval.Duration)
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, startPullTimeout)
	defer cancel()
	m, err := cfg.Module.imageCache().FetchRetrying(startCtx, ref, startPullFirstTry, startPullMaxWait, func(err error, retryIn time.Duration) {
		klog.ErrorS(err, "pulling the provider module; retrying", "image", ref, "retryIn", retryIn)
	})
	if err == nil {
		err = install(served, m.Wasm)
	}
	if err != nil {
		// The file left by an earlier run is not what module.image names.
		if rmErr := os.Remove(served); rmErr != nil && !os.IsNotExist(rmErr) {
			klog.ErrorS(rmErr, "removing the module of an earlier pull", "path", served)
		}
		watch("", "")
		return fmt.Errorf("module.image %s: %w", ref, err)
	}
	klog.InfoS("provider module pulled", "image", ref, "digest", m.Digest, "moduleSHA256", m.LayerDigest)
	watch(ref, m.Digest)
	return nil
}

// watchImageReference re-reads the cloud-config every interval and, when
// module.image names another artifact, pulls it and installs it as the
// served file, which the module reload then takes into service. A tag
// (module.allowTags) is resolved again at every poll, so a moved tag is
// followed too. A failed pull keeps the current module serving and is
// retried at the next poll. Other cloud-config changes still need a
// restart. It runs until ctx ends.
func watchImageReference(ctx context.Context, cloudConfigPath, current, currentDigest, served string, interval time.Duration) {
	// The last unusable cloud-config and failed reference, each reported
	// once rather than at every poll.
	var badConfig, failedRef string
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		data, err := os.ReadFile(cloudConfigPath)
		if err != nil {
			klog.ErrorS(err, "re-reading the cloud-config for module.image")
			continue
		}
		cfg, err := ParseConfig(bytes.NewReader(data))
		if err != nil {
			if badConfig != string(data) {
				badConfig = string(data)
				klog.ErrorS(err, "changed cloud-config not usable; the current module stays in service")
			}
			continue
		}
		ref := cfg.Module.Image
		if ref == "" || ref == current && oci.ByDigest(ref) {
			continue
		}
		pullCtx, cancel := context.WithTimeout(ctx, refPullTimeout)
		m, err := cfg.Module.imageCache().Fetch(pullCtx, ref)
		cancel()
		if err == nil && m.Digest != currentDigest {
			err = install(served, m.Wasm)
		}
		if err != nil {
			if failedRef != ref {
				failedRef = ref
				klog.ErrorS(err, "pulling the new provider module failed; the current module stays in service; retrying",
					"image", ref, "current", current)
			}
			continue
		}
		if m.Digest != currentDigest {
			klog.InfoS("provider module pulled for a changed module.image", "image", ref, "digest", m.Digest)
		}
		current, currentDigest, failedRef = ref, m.Digest, ""
	}
}

// install writes wasm to path through a rename, so the reload never reads
// a half-written file.
func install(path string, wasm []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".module-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(wasm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
