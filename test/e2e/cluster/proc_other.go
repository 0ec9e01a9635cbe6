//go:build !linux

package cluster

import "syscall"

// ChildAttrs returns nil: only Linux can tie a child's life to its parent.
func ChildAttrs() *syscall.SysProcAttr {
	return nil
}
