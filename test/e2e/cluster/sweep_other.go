//go:build !linux

package cluster

// sweepStale does nothing: Nodes run on Linux only.
func sweepStale() error { return nil }
