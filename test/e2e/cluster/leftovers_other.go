//go:build !linux

package cluster

import "os"

// killReferencing does nothing: containerd and the kubelet run on Linux only.
func killReferencing(string) error { return nil }

// unmountUnder does nothing: containerd and the kubelet run on Linux only.
func unmountUnder(string) error { return nil }

// removeUnmounted removes dir: nothing a test mounts is left elsewhere.
func removeUnmounted(dir string) error { return os.RemoveAll(dir) }

// containerLogLinks has no meaning outside Linux.
const containerLogLinks = ""

// removeLinksInto does nothing: the kubelet runs on Linux only.
func removeLinksInto(string, string) error { return nil }

// leftovers finds nothing: containerd and the kubelet run on Linux only.
func leftovers(string) error { return nil }
