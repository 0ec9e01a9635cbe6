package provider

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
)

// clusters is cloudprovider.Clusters over the module.
type clusters struct{ *Cloud }

func (c clusters) ListClusters(ctx context.Context) ([]string, error) {
	var list abi.Strings
	err := c.call(ctx, abi.ExportListClusters, &abi.Empty{}, &list)
	return list, mapError(err, notFoundIsError)
}

func (c clusters) Master(ctx context.Context, clusterName string) (string, error) {
	return c.callString(ctx, abi.ExportClusterMaster, clusterName, notFoundIsError)
}
