package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// Config is the --cloud-config file of provider "wasm". Unknown fields are
// rejected so that a typo never silently drops a limit or a grant.
type Config struct {
	// ClusterName is passed to the module's init. Default "kubernetes".
	ClusterName string `json:"clusterName,omitempty"`
	// Module is the module file or image, how it is trusted, reloaded and
	// rolled out.
	Module ModuleConfig `json:"module"`
	// Limits bounds the module's instances: their number, memory and time.
	Limits LimitsConfig `json:"limits,omitempty"`
	// HTTP is what the module may reach, and how fast.
	HTTP HTTPConfig `json:"http,omitempty"`
	// Credentials are the secrets the host attaches to the module's
	// requests.
	Credentials CredentialsConfig `json:"credentials,omitempty"`
	// Safety bounds what the module's answers can make the controllers do.
	Safety SafetyConfig `json:"safety,omitempty"`
	// OrphanSweep deletes load balancers whose Service is gone
	// (runtime/sweep).
	OrphanSweep sweep.Config `json:"orphanSweep,omitempty"`
	// ProviderConfig is any YAML value; the module's init receives it as JSON.
	ProviderConfig json.RawMessage `json:"providerConfig,omitempty"`
}

// ModuleConfig says where the module is and how to trust it.
type ModuleConfig struct {
	// Path of the .wasm or gzip-compressed .wasm.gz file, typically in a
	// mounted ConfigMap or image volume. Exclusive with Image.
	Path string `json:"path,omitempty"`
	// Image is a Wasm OCI artifact, REGISTRY/REPOSITORY@sha256:DIGEST, that
	// the CCM pulls itself (see image.go). A tag is refused unless
	// AllowTags. A changed reference, or a moved tag, is hot-reloaded.
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
	ReloadInterval metav1.Duration `json:"reloadInterval,omitempty"`
	// Rollout says how a changed module file is taken into service.
	Rollout RolloutConfig `json:"rollout,omitempty"`
	// LastKnownGood records the module that served well in the cluster, so
	// that a restart rolls a changed module out like a hot reload
	// (runtime/lifecycle).
	LastKnownGood LastKnownGoodConfig `json:"lastKnownGood,omitempty"`
}

// LimitsConfig bounds the module's resources.
type LimitsConfig struct {
	// PoolSize is the number of instances, hence of concurrent calls
	// (host.Config.PoolSize).
	PoolSize int `json:"poolSize,omitempty"`
	// CallTimeout bounds every call of the module, and the making of each
	// instance (host.Config.CallTimeout).
	CallTimeout metav1.Duration `json:"callTimeout,omitempty"`
	// MemoryLimitMiB caps each instance's linear memory
	// (host.Config.MemoryLimitPages).
	MemoryLimitMiB uint32 `json:"memoryLimitMiB,omitempty"`
	// RecycleAboveMiB replaces, after its call, an instance whose linear
	// memory grew past it. Default: per instance, eight times its memory
	// after init, at least 4 MiB and at most a quarter of memoryLimitMiB
	// (host.Config.RecycleAbovePages). A module built without a garbage
	// collector (TinyGo's -gc=leaking) is reclaimed only this way: one call
	// may allocate memoryLimitMiB minus the mark.
	RecycleAboveMiB uint32 `json:"recycleAboveMiB,omitempty"`
	// SharedStateMiB bounds the module's shared state in the host, which
	// its instances use to keep what they learn of the cloud across calls
	// (host.Config.SharedStateBytes). Default 8; counted in the memory
	// budget.
	SharedStateMiB uint32 `json:"sharedStateMiB,omitempty"`
	// FitPoolToMemory lowers poolSize at start until the memory budget
	// fits the container's limit, instead of refusing to start.
	FitPoolToMemory bool `json:"fitPoolToMemory,omitempty"`
}

// HTTPConfig is the module's HTTP grant.
type HTTPConfig struct {
	// AllowedOrigins lists the "scheme://host[:port]" destinations the
	// module may reach; anything else is refused, redirects included
	// (egress.Config.AllowedOrigins).
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// Timeout bounds each request.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// MaxResponseBytes bounds a response body.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// RateLimits budgets the requests to some of the allowed origins, for
	// the whole process (egress.RateBudget).
	RateLimits []egress.RateLimit `json:"rateLimits,omitempty"`

	// budget is RateLimits' budget, made once by New: HostConfig hands the
	// same one to every module generation, so that the module in service,
	// a shadow and a reloaded one spend one quota, as the cloud counts it.
	budget *egress.RateBudget
}

// CredentialsConfig is the module's credentials: dir is the mounted
// Secret, auth the credentials the host applies to the module's requests
// (credentials.AuthConfig), readable the keys the module may read raw,
// which weakens isolation and is empty by default.
type CredentialsConfig = credentials.Config

// ParseConfig reads and validates a cloud-config.
func ParseConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, errors.New("provider wasm needs --cloud-config")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading cloud-config: %w", err)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		if strings.Contains(err.Error(), `unknown field "granted"`) {
			err = fmt.Errorf("%w: credentials.granted was replaced by credentials.auth, which has the host apply a credential to the module's requests, and credentials.readable, which lets the module read it", err)
		}
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	return &cfg, nil
}

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
	if c.Limits.PoolSize < 0 || c.Limits.PoolSize > 256 {
		errs = append(errs, fmt.Errorf("limits.poolSize %d is outside 0..256", c.Limits.PoolSize))
	}
	if c.Limits.CallTimeout.Duration < 0 || c.HTTP.Timeout.Duration < 0 || c.Module.ReloadInterval.Duration < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	errs = append(errs, c.Safety.validate(), c.Module.Rollout.Validate(), c.OrphanSweep.Validate())
	if c.Limits.MemoryLimitMiB > 4096 {
		errs = append(errs, fmt.Errorf("limits.memoryLimitMiB %d exceeds wasm32's 4096", c.Limits.MemoryLimitMiB))
	}
	if c.Limits.SharedStateMiB > 4096 {
		errs = append(errs, fmt.Errorf("limits.sharedStateMiB %d exceeds 4096", c.Limits.SharedStateMiB))
	}
	if c.Limits.RecycleAboveMiB > 4096 {
		errs = append(errs, fmt.Errorf("limits.recycleAboveMiB %d exceeds wasm32's 4096", c.Limits.RecycleAboveMiB))
	}
	if _, err := egress.ParseAllowedOrigins(c.HTTP.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	} else if _, err := egress.NewRateBudget("", c.HTTP.RateLimits, c.HTTP.AllowedOrigins, nil); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if err := credentials.Validate(c.Credentials, c.HTTP.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("credentials: %w", err))
	}
	return errors.Join(errs...)
}

// HostConfig turns the cloud-config into the runtime's Config for a module
// labelled name.
func (c *Config) HostConfig(name string) host.Config {
	clusterName := c.ClusterName
	if clusterName == "" {
		clusterName = sweep.DefaultClusterName
	}
	return host.Config{
		Name:                name,
		ClusterName:         clusterName,
		ProviderConfig:      c.ProviderConfig,
		PoolSize:            c.Limits.PoolSize,
		CallTimeout:         c.Limits.CallTimeout.Duration,
		MemoryLimitPages:    c.Limits.MemoryLimitMiB * pagesPerMiB,
		RecycleAbovePages:   c.Limits.RecycleAboveMiB * pagesPerMiB,
		SharedStateBytes:    int(c.Limits.SharedStateMiB) << 20,
		CompilationCacheDir: c.Module.CompilationCacheDir,
		HTTP: egress.Config{
			AllowedOrigins:   c.HTTP.AllowedOrigins,
			Timeout:          c.HTTP.Timeout.Duration,
			MaxResponseBytes: c.HTTP.MaxResponseBytes,
			Budget:           c.HTTP.budget,
		},
		Credentials: c.Credentials,
	}
}
