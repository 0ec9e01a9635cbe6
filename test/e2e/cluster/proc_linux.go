package cluster

import "syscall"

// childAttrs makes the kernel kill etcd and kube-apiserver when the test
// binary dies, so a crashed or timed-out test run leaves no servers behind.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
