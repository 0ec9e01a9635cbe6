// Command relabel is a legitimate update of the simcloud provider module:
// it adds one label to the metadata of every instance, and changes
// nothing else.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
	"github.com/wasmccm/wasmccm/modules/simcloud"
)

// GenerationLabel is the label the update adds, with value "2".
const GenerationLabel = "simcloud.example/generation"

// relabel is the simcloud provider with one more label.
type relabel struct{ *simcloud.Provider }

func (r relabel) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	meta, err := r.Provider.InstanceMetadata(ctx, node)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{GenerationLabel: "2"}
	for k, v := range meta.AdditionalLabels {
		labels[k] = v
	}
	meta.AdditionalLabels = labels
	return meta, nil
}

func init() {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(relabel{p})
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
