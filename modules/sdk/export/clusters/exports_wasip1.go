//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package clusters

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_list_clusters
func exportListClusters(ptr, size uint32) uint64 { return guest.Export(ptr, size, listClusters) }

//go:wasmexport wasmccm_cluster_master
func exportClusterMaster(ptr, size uint32) uint64 { return guest.Export(ptr, size, clusterMaster) }
