package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// netns is the network namespace of one Node. Pods on the host network
// share their Node's network, and the manager's Pods bind a fixed port, so
// two Nodes on one machine need a network each, as two machines have. The
// mount namespace stays the host's: the kubelet's mounts are found and
// removed as on a single Node.
//
// The namespace has only loopback, holding the Node's address, and reaches
// the host through forwarders: listeners inside it on the same loopback
// addresses the API server and the test's servers have on the host, so
// that every Node, and the host, use one address for each.
type netns struct {
	name       string
	forwarders []*forwarder
}

// netnsDir is where `ip netns` keeps the namespaces it names.
const netnsDir = "/run/netns"

// newNetns creates the namespace name with loopback up and ip on it.
func newNetns(name, ip string) (*netns, error) {
	n := &netns{name: name}
	if err := ipCommand("netns", "add", name); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "addr", "add", ip + "/32", "dev", "lo"},
	} {
		if err := ipCommand(args...); err != nil {
			return nil, errors.Join(err, n.remove())
		}
	}
	return n, nil
}

func ipCommand(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// path is the namespace's file, for nsenter and setns.
func (n *netns) path() string { return netnsDir + "/" + n.name }

// wrap returns the command line that runs binary with args inside the
// namespace: nsenter enters it and executes binary in its own place. A nil
// netns runs it as is, in the host's network.
func (n *netns) wrap(binary string, args []string) (string, []string) {
	if n == nil {
		return binary, args
	}
	return "nsenter", append([]string{"--net=" + n.path(), "--", binary}, args...)
}

// forward makes addr, a loopback address of the host, reachable at the
// same address inside the namespace.
func (n *netns) forward(addr string) error {
	l, err := listenIn(n.path(), addr)
	if err != nil {
		return fmt.Errorf("forward %s into %s: %w", addr, n.name, err)
	}
	f := &forwarder{listener: l, target: addr, conns: map[net.Conn]bool{}}
	n.forwarders = append(n.forwarders, f)
	go f.serve()
	return nil
}

// remove closes the forwarders and deletes the namespace.
func (n *netns) remove() error {
	if n == nil {
		return nil
	}
	for _, f := range n.forwarders {
		f.close()
	}
	return ipCommand("netns", "delete", n.name)
}

// listenIn opens a TCP listener on addr inside the namespace at path. A
// socket belongs to the namespace of the thread that creates it, so one
// locked thread enters the namespace for the call and goes back; should it
// fail to go back, its goroutine ends locked and the runtime retires the
// thread rather than reuse it.
func listenIn(path, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer host.Close()
		target, err := os.Open(path)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			done <- result{err: err}
			return
		}
		l, err := net.Listen("tcp", addr)
		if backErr := setns(host); backErr != nil {
			if l != nil {
				l.Close()
			}
			done <- result{err: errors.Join(err, backErr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}

func setns(f *os.File) error {
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", f.Name(), err)
	}
	return nil
}

// forwarder copies each connection accepted in a namespace to its target
// on the host, both ways.
type forwarder struct {
	listener net.Listener
	target   string

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func (f *forwarder) serve() {
	for {
		in, err := f.listener.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.target)
		if err != nil {
			in.Close()
			continue
		}
		if !f.track(in, out) {
			return
		}
		go f.pipe(in, out)
		go f.pipe(out, in)
	}
}

// pipe copies until either side ends, then closes both.
func (f *forwarder) pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	f.mu.Lock()
	delete(f.conns, dst)
	delete(f.conns, src)
	f.mu.Unlock()
}

// track records conns for close, or closes them if the forwarder is
// closed already.
func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = true
	}
	return true
}

func (f *forwarder) close() {
	f.listener.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
}
