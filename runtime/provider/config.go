package provider

import (
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/membudget"
)

// HostConfig turns the cloud-config into the runtime's Config for a module
// labelled name, without a rate budget: Cloud.instantiate hands every
// module generation its Cloud's one budget.
func HostConfig(c *cloudconfig.Config, name string) host.Config {
	return host.Config{
		Name:                name,
		ClusterName:         orDefault(c.ClusterName, cloudconfig.DefaultClusterName),
		ProviderConfig:      c.ProviderConfig,
		PoolSize:            c.Limits.PoolSize,
		CallTimeout:         c.Limits.CallTimeout.Duration,
		MemoryLimitPages:    c.Limits.MemoryLimitMiB * pagesPerMiB,
		RecycleAbovePages:   c.Limits.RecycleAboveMiB * pagesPerMiB,
		StackLimitBytes:     int(c.Limits.StackLimitMiB) << 20,
		SharedStateBytes:    int(c.Limits.SharedStateMiB) << 20,
		CompilationCacheDir: c.Module.CompilationCacheDir,
		HTTP: egress.Config{
			AllowedOrigins:   c.HTTP.AllowedOrigins,
			Timeout:          c.HTTP.Timeout.Duration,
			MaxResponseBytes: c.HTTP.MaxResponseBytes,
		},
		Credentials: c.Credentials,
	}
}

// MemoryBudget is the most the module of c may cost (runtime/membudget),
// zero limits taking their defaults. twoCopies: a rollout, at start or by
// hot reload, runs the old and the new module at once.
func MemoryBudget(c *cloudconfig.Config, twoCopies bool) membudget.Budget {
	copies := 1
	if twoCopies {
		copies = 2
	}
	l := c.Limits
	return membudget.New(l.PoolSize, int(l.MemoryLimitMiB), int(l.StackLimitMiB), int(l.SharedStateMiB), copies)
}
