// Command noop is a provider module whose InstancesV2 methods answer
// constants without touching the host: calling it measures the ABI alone
// (input encoding, the export call, output decoding, the pool).
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
)

type provider struct{}

func init() {
	sdk.Set(provider{})
	instancesv2.Set(provider{})
}

func main() {}

var metadata = abi.InstanceMetadata{
	ProviderID:   "noop://i-0001",
	InstanceType: "sim.small",
	NodeAddresses: []abi.NodeAddress{
		{Type: "InternalIP", Address: "10.0.0.1"},
		{Type: "Hostname", Address: "node-0001"},
	},
	Zone:   "sim-1a",
	Region: "sim-1",
}

func (provider) Init(context.Context, string, []byte) error { return nil }

func (provider) InstanceExists(context.Context, *abi.Node) (bool, error)   { return true, nil }
func (provider) InstanceShutdown(context.Context, *abi.Node) (bool, error) { return false, nil }
func (provider) InstanceMetadata(context.Context, *abi.Node) (*abi.InstanceMetadata, error) {
	return &metadata, nil
}
