// Package cloudconfig is the --cloud-config file of provider "wasm": its
// types, their defaults and their validation. The file lists the modules
// the CCM serves, each with its Config and what it serves (File, Entry);
// a file of one module's Config is read as a list of that one module.
// docs/reference/cloud-config.md is generated from these types and their
// doc comments.
//
// It imports none of Kubernetes' client or metrics packages and no part
// of the runtime that runs modules (only sigs.k8s.io/yaml, apimachinery's
// label selectors and name validation, and klog through the credentials
// config): the configuration can be read, checked and fuzzed (`go test
// -fuzz` instruments every package a fuzz target links) without them. The packages that act on a section own its
// meaning: runtime/lifecycle the rollout, runtime/deletion the deletion
// budget, runtime/sweep the orphan sweep, runtime/egress the rate limits,
// runtime/credentials the credentials, runtime/provider the rest.
package cloudconfig

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/oci/imageref"
)

// Config is one module's configuration: a File's Entry, or the whole file
// of a CCM with one module.
type Config struct {
	// ClusterName is passed to the module's init. Default "kubernetes".
	ClusterName string `json:"clusterName,omitempty"`
	// Module is the module file or image, how it is trusted, reloaded and
	// rolled out.
	Module Module `json:"module"`
	// Limits bounds the module's instances: their number, memory and time.
	Limits Limits `json:"limits,omitempty"`
	// HTTP is what the module may reach, and how fast.
	HTTP HTTP `json:"http,omitempty"`
	// Credentials are the secrets the host attaches to the module's
	// requests.
	Credentials credentials.Config `json:"credentials,omitempty"`
	// Safety bounds what the module's answers can make the controllers do.
	Safety Safety `json:"safety,omitempty"`
	// OrphanSweep deletes load balancers whose Service is gone
	// (runtime/sweep).
	OrphanSweep OrphanSweep `json:"orphanSweep,omitempty"`
	// ProviderConfig is any YAML value; the module's init receives it as JSON.
	ProviderConfig json.RawMessage `json:"providerConfig,omitempty"`
}

// Module says where the module is and how to trust it.
type Module struct {
	// Path of the .wasm or gzip-compressed .wasm.gz file, typically in a
	// mounted ConfigMap or image volume. Exclusive with Image.
	Path string `json:"path,omitempty"`
	// Image is a Wasm OCI artifact, REGISTRY/REPOSITORY@sha256:DIGEST, that
	// the CCM pulls itself (runtime/provider's image.go). A tag is refused
	// unless AllowTags. A changed reference, or a moved tag, is
	// hot-reloaded.
	Image string `json:"image,omitempty"`
	// AllowTags accepts an Image by tag, resolved again at every
	// ReloadInterval, so that a moved tag is followed.
	AllowTags bool `json:"allowTags,omitempty"`
	// RegistryConfig is a docker config file with the registry's
	// credentials, e.g. a mounted kubernetes.io/dockerconfigjson Secret.
	RegistryConfig string `json:"registryConfig,omitempty"`
	// ImageCacheDir keeps pulled modules by digest, so that a restart or a
	// registry outage does not need the registry.
	ImageCacheDir string `json:"imageCacheDir,omitempty"`
	// SHA256 pins the file's digest (hex, optional "sha256:" prefix).
	SHA256 string `json:"sha256,omitempty"`
	// PublicKeyPath and SignaturePath, when set, require a valid ECDSA
	// P-256 signature of the file, as `cosign sign-blob --key` makes.
	PublicKeyPath string `json:"publicKeyPath,omitempty"`
	// SignaturePath is the file's detached signature, base64, as
	// `cosign sign-blob` writes it; set with PublicKeyPath.
	SignaturePath string `json:"signaturePath,omitempty"`
	// CompilationCacheDir keeps compiled code across restarts.
	CompilationCacheDir string `json:"compilationCacheDir,omitempty"`
	// ReloadInterval is how often the file is checked for a new version;
	// 0 disables hot reload.
	ReloadInterval Duration `json:"reloadInterval,omitempty"`
	// Rollout says how a changed module file is taken into service.
	Rollout Rollout `json:"rollout,omitempty"`
	// LastKnownGood records the module that served well in the cluster, so
	// that a restart rolls a changed module out like a hot reload
	// (runtime/lifecycle).
	LastKnownGood LastKnownGood `json:"lastKnownGood,omitempty"`
}

// Limits bounds the module's resources.
type Limits struct {
	// PoolSize is the number of instances, hence of concurrent calls
	// (host.Config.PoolSize).
	PoolSize int `json:"poolSize,omitempty"`
	// CallTimeout bounds every call of the module, and the making of each
	// instance (host.Config.CallTimeout).
	CallTimeout Duration `json:"callTimeout,omitempty"`
	// MemoryLimitMiB caps each instance's linear memory
	// (host.Config.MemoryLimitPages).
	MemoryLimitMiB uint32 `json:"memoryLimitMiB,omitempty"`
	// RecycleAboveMiB replaces, after its call, an instance whose linear
	// memory grew past it. Default: per instance, eight times its memory
	// after init, at least 4 MiB and at most a quarter of memoryLimitMiB,
	// raised while the instance holds a load balancer Node list by what
	// its memory grew to take the list (host.Config.RecycleAbovePages). A
	// module built without a garbage collector (TinyGo's -gc=leaking) is
	// reclaimed only this way: one call may allocate memoryLimitMiB minus
	// the mark.
	RecycleAboveMiB uint32 `json:"recycleAboveMiB,omitempty"`
	// StackLimitMiB is the most host memory one instance's call stack may
	// take (host.Config.StackLimitBytes), counted in the memory budget
	// beside memoryLimitMiB. A call whose frames would take more traps,
	// and a module with a function whose frame alone would take more
	// than a tenth of it is refused at load, with the value it needs.
	StackLimitMiB uint32 `json:"stackLimitMiB,omitempty"`
	// SharedStateMiB bounds the module's shared state in the host, which
	// its instances use to keep what they learn of the cloud across calls
	// (host.Config.SharedStateBytes). Default 8; counted in the memory
	// budget.
	SharedStateMiB uint32 `json:"sharedStateMiB,omitempty"`
	// FitPoolToMemory lowers poolSize at start until the memory budget
	// fits the container's limit, instead of refusing to start.
	FitPoolToMemory bool `json:"fitPoolToMemory,omitempty"`
}

// HTTP is the module's HTTP grant.
type HTTP struct {
	// AllowedOrigins lists the "scheme://host[:port]" destinations the
	// module may reach; anything else is refused, redirects included
	// (egress.Config.AllowedOrigins).
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// Timeout bounds each request.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxResponseBytes bounds a response body.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// RateLimits budgets the requests to some of the allowed origins, for
	// the whole process (egress.RateBudget).
	RateLimits []RateLimit `json:"rateLimits,omitempty"`
}

// Safety bounds what the module's answers can make the upstream
// controllers do.
type Safety struct {
	// MaxNodeDeletions is the deletion budget: how many Nodes the
	// module's "gone" answers may delete in a window.
	MaxNodeDeletions DeletionBudget `json:"maxNodeDeletions,omitempty"`
}

// Bounds of the limits section.
const (
	// maxPoolSize is the most instances of one module.
	maxPoolSize = 256
	// maxMiB is wasm32's address space, the most any memory setting may
	// name.
	maxMiB = 4096
)

// Validate checks every field of the cloud-config and returns every problem
// found.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Module.validateSource(); err != nil {
		errs = append(errs, err)
	}
	if (c.Module.PublicKeyPath == "") != (c.Module.SignaturePath == "") {
		errs = append(errs, errors.New("module.publicKeyPath and module.signaturePath go together"))
	}
	if c.Limits.PoolSize < 0 || c.Limits.PoolSize > maxPoolSize {
		errs = append(errs, fmt.Errorf("limits.poolSize %d is outside 0..%d", c.Limits.PoolSize, maxPoolSize))
	}
	if c.Limits.CallTimeout.Duration < 0 || c.HTTP.Timeout.Duration < 0 || c.Module.ReloadInterval.Duration < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	errs = append(errs, c.Safety.MaxNodeDeletions.Validate(), c.Module.Rollout.Validate(), c.OrphanSweep.Validate())
	if c.Limits.MemoryLimitMiB > maxMiB {
		errs = append(errs, fmt.Errorf("limits.memoryLimitMiB %d exceeds wasm32's %d", c.Limits.MemoryLimitMiB, maxMiB))
	}
	if c.Limits.StackLimitMiB > maxMiB {
		errs = append(errs, fmt.Errorf("limits.stackLimitMiB %d exceeds %d", c.Limits.StackLimitMiB, maxMiB))
	}
	if c.Limits.SharedStateMiB > maxMiB {
		errs = append(errs, fmt.Errorf("limits.sharedStateMiB %d exceeds %d", c.Limits.SharedStateMiB, maxMiB))
	}
	if c.Limits.RecycleAboveMiB > maxMiB {
		errs = append(errs, fmt.Errorf("limits.recycleAboveMiB %d exceeds wasm32's %d", c.Limits.RecycleAboveMiB, maxMiB))
	}
	if _, err := Paces(c.HTTP.RateLimits, c.HTTP.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if err := credentials.Validate(c.Credentials, c.HTTP.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("credentials: %w", err))
	}
	return errors.Join(errs...)
}

// validateSource checks that exactly one module source is set and that an
// image reference is one the CCM will pull.
func (m *Module) validateSource() error {
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
		if _, err := imageref.Parse(m.Image, m.AllowTags); err != nil {
			return fmt.Errorf("module.image: %w", err)
		}
	}
	return nil
}

// RollsOut reports whether the module of c can run beside another copy:
// a rollout by hot reload, or one at start from the last-known-good
// record, which needs the cluster (kube).
func (c *Config) RollsOut(kube bool) bool {
	return c.Module.ReloadInterval.Duration > 0 || kube && !c.Module.LastKnownGood.Disabled
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
