package provider

import (
	"time"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// Defaults is the cloud-config with the default of every field written
// out, as the host (host.Defaults) and the provider apply them to the
// fields left zero; docs/reference/cloud-config.md is made from it. A
// field whose default depends on the module or the environment
// (limits.recycleAboveMiB, module.lastKnownGood.namespace) stays zero and
// its doc comment says how it is set.
func Defaults() cloudconfig.Config {
	h := host.Defaults()
	return cloudconfig.Config{
		ClusterName: cloudconfig.DefaultClusterName,
		Module: cloudconfig.Module{
			Rollout:       cloudconfig.Rollout{Shadow: cloudconfig.Shadow{}.WithDefaults(), Rollback: cloudconfig.Rollback{}.WithDefaults()},
			LastKnownGood: cloudconfig.LastKnownGood{Name: cloudconfig.DefaultLastKnownGoodName},
		},
		Limits: cloudconfig.Limits{
			PoolSize:       h.PoolSize,
			CallTimeout:    duration(h.CallTimeout),
			MemoryLimitMiB: h.MemoryLimitPages / pagesPerMiB,
			StackLimitMiB:  uint32(h.StackLimitBytes >> 20),
			SharedStateMiB: uint32(h.SharedStateBytes >> 20),
		},
		HTTP: cloudconfig.HTTP{
			Timeout:          duration(h.HTTP.Timeout),
			MaxResponseBytes: h.HTTP.MaxResponseBytes,
		},
		Safety:      cloudconfig.Safety{MaxNodeDeletions: cloudconfig.DeletionBudget{}.WithDefaults()},
		OrphanSweep: cloudconfig.OrphanSweep{}.WithDefaults(),
	}
}

// pagesPerMiB converts the cloud-config's MiB to wasm's 64 KiB pages.
const pagesPerMiB = 16

func duration(d time.Duration) cloudconfig.Duration { return cloudconfig.Duration{Duration: d} }
