package modulefile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/oci"
)

// A module named by an image reference is pulled from its registry into
// the cache directory and installed there as one file, ServedFile, which
// is then read like any module file: the sha256 and signature checks,
// loading and hot reload with its rollout are the path a module file in a
// ConfigMap takes. The image only decides which bytes are in that file.
const ServedFile = "module.wasm"

const (
	startPullFirstTry = time.Second
	startPullMaxWait  = 8 * time.Second
	// refPullTimeout bounds one pull of a changed reference.
	refPullTimeout = 2 * time.Minute
)

// Image is a module as an OCI artifact: module.image and its settings.
type Image struct {
	// Ref is REGISTRY/REPOSITORY@sha256:DIGEST, or a tag with AllowTags.
	Ref       string
	AllowTags bool
	// RegistryConfig is a docker config file with the registry's
	// credentials.
	RegistryConfig string
	// CacheDir keeps pulled modules by digest, so that a restart or a
	// registry outage does not need the registry, and holds ServedFile.
	CacheDir string
}

// ServedPath is the module file the image is installed as.
func (im Image) ServedPath() string { return filepath.Join(im.CacheDir, ServedFile) }

func (im Image) cache() *oci.Cache {
	c := &oci.Cache{Dir: im.CacheDir, Options: oci.Options{AllowTags: im.AllowTags}}
	if im.RegistryConfig != "" {
		c.Keychain = oci.DockerConfigKeychain(im.RegistryConfig)
	}
	return c
}

// Pull pulls im, retrying for timeout with each failure logged, and
// installs it as ServedPath, returning the artifact's digest. When it
// fails, a file that an earlier run installed is removed: it is not what
// im names.
func Pull(ctx context.Context, im Image, timeout time.Duration) (string, error) {
	pullCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := im.cache().FetchRetrying(pullCtx, im.Ref, startPullFirstTry, startPullMaxWait, func(err error, retryIn time.Duration) {
		klog.ErrorS(err, "pulling the provider module; retrying", "image", im.Ref, "retryIn", retryIn)
	})
	if err == nil {
		err = install(im.ServedPath(), m.Wasm)
	}
	if err != nil {
		if rmErr := os.Remove(im.ServedPath()); rmErr != nil && !os.IsNotExist(rmErr) {
			klog.ErrorS(rmErr, "removing the module of an earlier pull", "path", im.ServedPath())
		}
		return "", fmt.Errorf("module.image %s: %w", im.Ref, err)
	}
	klog.InfoS("provider module pulled", "image", im.Ref, "digest", m.Digest, "moduleSHA256", m.LayerDigest)
	return m.Digest, nil
}

// Follow calls configured every interval for the image now configured
// and, when it names another artifact than current (whose artifact digest
// is currentDigest; both empty when none was installed), pulls it and
// installs it at served, which the module reload then takes into service.
// A tag (AllowTags) is resolved again at every poll, so a moved tag is
// followed too. A failed pull keeps the served file and is retried at the
// next poll. It runs until ctx ends.
func Follow(ctx context.Context, configured func() (Image, error), current, currentDigest, served string, interval time.Duration) {
	// The last error reading the configuration and the last failed
	// reference, each reported once rather than at every poll.
	var badConfig, failedRef string
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		im, err := configured()
		if err != nil {
			if badConfig != err.Error() {
				badConfig = err.Error()
				klog.ErrorS(err, "changed cloud-config not usable; the current module stays in service")
			}
			return
		}
		if im.Ref == "" || im.Ref == current && oci.ByDigest(im.Ref) {
			return
		}
		pullCtx, cancel := context.WithTimeout(ctx, refPullTimeout)
		m, err := im.cache().Fetch(pullCtx, im.Ref)
		cancel()
		if err == nil && m.Digest != currentDigest {
			err = install(served, m.Wasm)
		}
		if err != nil {
			if failedRef != im.Ref {
				failedRef = im.Ref
				klog.ErrorS(err, "pulling the new provider module failed; the current module stays in service; retrying",
					"image", im.Ref, "current", current)
			}
			return
		}
		if m.Digest != currentDigest {
			klog.InfoS("provider module pulled for a changed module.image", "image", im.Ref, "digest", m.Digest)
		}
		current, currentDigest, failedRef = im.Ref, m.Digest, ""
	}, interval)
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
