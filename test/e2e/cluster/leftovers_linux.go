package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// containerLogLinks is where a kubelet links each container's log, whatever
// its configuration says.
const containerLogLinks = "/var/log/containers"

// removeLinksInto removes the symbolic links in dir that point below
// target: a kubelet removes its links only for the containers it removes
// itself.
func removeLinksInto(dir, target string) error {
	links, err := linksInto(dir, target)
	for _, link := range links {
		err = errors.Join(err, os.Remove(link))
	}
	return err
}

// linksInto lists the symbolic links in dir that point below target; a
// missing dir has none.
func linksInto(dir, target string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var links []string
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(path); err == nil && strings.HasPrefix(dest, target+"/") {
			links = append(links, path)
		}
	}
	return links, nil
}

// killReferencing kills every process whose command line contains s, a
// path unique to one test directory, and waits until they are gone. It is
// how the detached containerd shims of a test containerd are found.
func killReferencing(s string) error {
	var pids []int
	err := eachProcess(func(pid int, cmdline []byte) {
		if bytes.Contains(cmdline, []byte(s)) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			pids = append(pids, pid)
		}
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(stopGrace)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d (referencing %s) survived SIGKILL", pid, s)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// eachProcess calls fn with the ID and command line (arguments separated
// by NUL bytes) of every process but this one.
func eachProcess(fn func(pid int, cmdline []byte)) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		// A process that has just exited has no command line any more.
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil {
			fn(pid, cmdline)
		}
	}
	return nil
}

// unmountUnder unmounts every mount point below dir, deepest first. Lazy
// unmounts (MNT_DETACH) cannot fail on a busy mount, which a process killed
// a moment ago may still hold.
func unmountUnder(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// "36 35 98:0 /mnt1 /mnt/parent rw ...": the fifth field is the
		// mount point, with blanks and backslashes escaped in octal.
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(points, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(points), nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a blank).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeUnmounted removes dir unless something is still mounted below it:
// removing through a mount would delete what it shows, which for a bind
// mount are files of the host.
func removeUnmounted(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("%s not removed: still mounted below it: %s", dir, strings.Join(points, ", "))
	}
	return os.RemoveAll(dir)
}

// leftovers reports processes whose command line or root directory lies
// in dir, mounts below it, and the Nodes' network namespaces, cgroups and
// container log links, which are named after or point into dir.
func leftovers(dir string) error {
	var errs []error
	err := eachProcess(func(pid int, cmdline []byte) {
		root, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "root"))
		if bytes.Contains(cmdline, []byte(dir)) || strings.HasPrefix(root, dir+"/") {
			errs = append(errs, fmt.Errorf("process %d still runs: %s (root %s)", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), root))
		}
	})
	if err != nil {
		return err
	}
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, p := range points {
		errs = append(errs, fmt.Errorf("%s is still mounted", p))
	}
	// Nodes' network namespaces are named after the directory.
	namespaces, err := filepath.Glob(filepath.Join(netnsDir, filepath.Base(dir)+"-*"))
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		errs = append(errs, fmt.Errorf("network namespace %s still exists", ns))
	}
	// So are their cgroups, in every hierarchy.
	hierarchies, _, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		cgroups, err := filepath.Glob(filepath.Join(h, filepath.Base(dir)+"-*"))
		if err != nil {
			return err
		}
		for _, cg := range cgroups {
			errs = append(errs, fmt.Errorf("cgroup %s still exists", cg))
		}
	}
	links, err := linksInto(containerLogLinks, dir)
	if err != nil {
		return err
	}
	for _, link := range links {
		errs = append(errs, fmt.Errorf("container log link %s still exists", link))
	}
	return errors.Join(errs...)
}
