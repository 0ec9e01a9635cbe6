package provider

import "github.com/wasmccm/wasmccm/runtime/deletion"

// SafetyConfig bounds what the module's answers can make the upstream
// controllers do.
type SafetyConfig struct {
	MaxNodeDeletions DeletionBudgetConfig `json:"maxNodeDeletions,omitempty"`
}

// DeletionBudgetConfig is safety.maxNodeDeletions, CorroborationConfig
// safety.maxNodeDeletions.corroborated (runtime/deletion).
type (
	DeletionBudgetConfig = deletion.BudgetConfig
	CorroborationConfig  = deletion.CorroborationConfig
)

func (c SafetyConfig) validate() error { return c.MaxNodeDeletions.Validate() }
