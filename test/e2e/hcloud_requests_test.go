package e2e

import (
	"testing"

	"github.com/wasmccm/wasmccm/test/scale/requests"
)

// TestHcloudRequests is TestHcloudDifferential's sibling for reads: the
// Hetzner Cloud API requests per hour, by endpoint, that wasmccm with the
// TinyGo-built hcloud module and the official CCM named by
// WASMCCM_HCLOUD_CCM make in steady state with 60 Ready Nodes and their
// routes, each on a fresh kube-apiserver and fake API, with the CCMs'
// default periods (test/scale/requests says how). test/scale's
// TestRequests runs the same at other sizes. Skipped unless the variable
// is set; WASMCCM_REQUESTS_WINDOW changes the window (6 minutes, so that
// it holds a node status update).
func TestHcloudRequests(t *testing.T) {
	compareRequests(t, requests.Hcloud, hcloudModule, "WASMCCM_HCLOUD_CCM", []int{60})
}
