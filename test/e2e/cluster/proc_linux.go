package cluster

import "syscall"

// ChildAttrs makes the kernel kill a child (etcd, kube-apiserver, a CCM)
// when the test binary dies, so a crashed or timed-out test run leaves no
// servers behind.
func ChildAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
