//go:build !linux

package cluster

import "syscall"

// childAttrs returns nil: only Linux can tie a child's life to its parent.
func childAttrs() *syscall.SysProcAttr {
	return nil
}
