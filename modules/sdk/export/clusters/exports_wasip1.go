//go:build wasip1

package clusters

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_list_clusters
func exportListClusters(ptr, size uint32) uint64 { return guest.Export(ptr, size, listClusters) }

//go:wasmexport wasmccm_cluster_master
func exportClusterMaster(ptr, size uint32) uint64 { return guest.Export(ptr, size, clusterMaster) }
