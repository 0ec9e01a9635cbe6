package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/host"
)

var reloads = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "reloads_total",
	Help:           "Module reload attempts by result (loaded, rejected, rolled_back).",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

func init() { legacyregistry.MustRegister(reloads) }

// moduleFile is a module as read from disk and verified.
type moduleFile struct {
	wasm   []byte
	digest string
	// raw and signature are the file and its signature as stored, which
	// the last-known-good record keeps.
	raw, signature []byte
	// checked names everything its checks read: the module's digest, the
	// pin, and the signature's and public key's contents (or why they
	// could not be read). A rejection is remembered under it, so that a
	// signature or key arriving after the module file (another ConfigMap
	// or Secret, a key rotation) is checked again.
	checked string
}

// ReadModule reads the module cfg names and applies every check it asks
// for (sha256 pin, then signature, both over the file's bytes as stored),
// returning the decompressed wasm. The CCM and the wasmccm tool both load
// modules through it, so neither can skip a check the other makes.
func ReadModule(cfg ModuleConfig) ([]byte, error) {
	file, err := readModuleFile(cfg)
	return file.wasm, err
}

func readModuleFile(cfg ModuleConfig) (moduleFile, error) {
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		return moduleFile{}, fmt.Errorf("reading module: %w", err)
	}
	file, err := checkModule(cfg, raw, func() ([]byte, error) { return os.ReadFile(cfg.SignaturePath) })
	if err != nil {
		err = fmt.Errorf("module %s: %w", cfg.Path, err)
	}
	return file, err
}

// checkModule applies cfg's checks to a module file's bytes, reading the
// signature only when cfg requires one, and decompresses it.
func checkModule(cfg ModuleConfig, raw []byte, readSignature func() ([]byte, error)) (moduleFile, error) {
	sum := sha256.Sum256(raw)
	file := moduleFile{digest: hex.EncodeToString(sum[:]), raw: raw}
	file.checked = file.digest + " pin " + cfg.SHA256
	if err := host.CheckSHA256(raw, cfg.SHA256); err != nil {
		return file, err
	}
	if cfg.PublicKeyPath != "" {
		key, keyErr := os.ReadFile(cfg.PublicKeyPath)
		sig, sigErr := readSignature()
		file.checked += " key " + contentKey(key, keyErr) + " signature " + contentKey(sig, sigErr)
		if keyErr != nil {
			return file, fmt.Errorf("module public key: %w", keyErr)
		}
		if sigErr != nil {
			return file, fmt.Errorf("module signature: %w", sigErr)
		}
		if err := host.VerifySignature(raw, key, sig); err != nil {
			return file, err
		}
		file.signature = sig
	}
	var err error
	file.wasm, err = host.Decompress(raw)
	return file, err
}

// contentKey names a file's content, or the error reading it.
func contentKey(b []byte, err error) string {
	if err != nil {
		return "(" + err.Error() + ")"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// rolloutTick paces a rollout begun at start, and the last-known-good
// record, when hot reload is off.
const rolloutTick = 5 * time.Second

// watch polls the module file, when hot reload is on, and takes the
// rollout and record decisions due. Polling rather than inotify: the
// kubelet updates a ConfigMap volume by swapping a "..data" symlink, which
// a per-file watch misses, and one stat-and-read every few seconds is
// cheap.
func (c *Cloud) watch(ctx context.Context) {
	reload := c.cfg.Module.ReloadInterval.Duration
	ticker := time.NewTicker(orDefault(reload, rolloutTick))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if reload > 0 {
				c.reloadIfChanged(ctx)
			}
			c.advanceRollout(ctx)
			c.recordLastKnownGood(ctx)
		}
	}
}

// reloadIfChanged starts the rollout of the module file's new content, if
// any (rollout.go). The new module is compiled and initialised off the
// call path; any problem keeps the module in service.
func (c *Cloud) reloadIfChanged(ctx context.Context) {
	file, err := readModuleFile(c.cfg.Module)
	if err == nil && (file.digest == c.served.digest || file.digest == c.candidate()) {
		return
	}
	// A rejected file is reported once, not at every poll: a file that
	// failed a check under everything the check read (file.checked), one
	// rejected in shadow or probation under its digest, whatever its
	// signature.
	rejection := file.checked
	if rejection == "" && err != nil {
		rejection = err.Error()
	}
	if rejection == c.rejected || (err == nil && file.digest == c.rejected) {
		return
	}
	var mod Backend
	if err == nil {
		mod, err = c.load(ctx, file)
	}
	if err != nil {
		c.rejected = rejection
		reloads.WithLabelValues("rejected").Inc()
		klog.ErrorS(err, "new module rejected; the current module stays in service",
			"path", c.cfg.Module.Path, "rejectedSHA256", file.digest, "currentSHA256", c.served.digest)
		c.events.emit(v1.EventTypeWarning, eventModuleRejected,
			"new module "+file.digest+" rejected, "+c.served.digest+" stays in service: "+err.Error())
		return
	}
	c.rejected = ""
	c.startRollout(mod, file)
}

// candidate is the digest of the module in shadow, if any.
func (c *Cloud) candidate() string {
	if r := c.rollout.Load(); r != nil && r.phase == phaseShadow {
		return r.file.digest
	}
	return ""
}

// load compiles and initialises a module file and checks that it can
// stand in for the module in service.
func (c *Cloud) load(ctx context.Context, file moduleFile) (Backend, error) {
	mod, err := c.instantiate(ctx, file)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(mod.Info().Capabilities, c.capabilities.Capabilities) {
		mod.Close(ctx)
		return nil, fmt.Errorf("new module's capabilities %v differ from %v, which the controllers were started with; restart the CCM to change them",
			mod.Info().Capabilities, c.capabilities.Capabilities)
	}
	return mod, nil
}

// instantiate compiles and initialises a module file with the grants of
// the cloud-config.
func (c *Cloud) instantiate(ctx context.Context, file moduleFile) (Backend, error) {
	return host.New(ctx, file.wasm, c.auth.hostConfig(c.cfg))
}
