package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// sweepStale removes what clusters with Nodes left behind when their test
// binary was killed (by go test -timeout, say) before Stop could run. The
// daemons die with the test binary (see ChildAttrs), but containers and
// their shims run on, and mounts, cgroups and network namespaces stay. A
// cluster directory is stale when no process but a shim refers to it.
func sweepStale() error {
	nodeDirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*", "nodes"))
	if err != nil {
		return err
	}
	var errs []error
	for _, nodes := range nodeDirs {
		if dir := filepath.Dir(nodes); !inUse(dir) {
			errs = append(errs, sweep(dir))
		}
	}
	return errors.Join(errs...)
}

// inUse reports whether a process other than a containerd shim refers to
// dir on its command line.
func inUse(dir string) bool {
	used := false
	eachProcess(func(_ int, cmdline []byte) {
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if bytes.Contains(cmdline, []byte(dir)) && !bytes.HasPrefix([]byte(filepath.Base(string(argv0))), []byte("containerd-shim")) {
			used = true
		}
	})
	return used
}

// sweep stops and removes what the Nodes of the stale cluster at dir left,
// as stopNodes would have, and then dir.
func sweep(dir string) error {
	entries, err := os.ReadDir(filepath.Join(dir, "nodes"))
	if err != nil {
		return err
	}
	var errs []error
	var cgroups []*cgroupRoot
	for _, e := range entries {
		cg, err := existingCgroupRoot(filepath.Base(dir) + "-" + e.Name())
		if err == nil {
			// The containers of the Node's Pods.
			err = cg.killAll()
			cgroups = append(cgroups, cg)
		}
		errs = append(errs, err)
	}
	errs = append(errs, killReferencing(dir), unmountUnder(dir), removeLinksInto(containerLogLinks, dir))
	for _, cg := range cgroups {
		errs = append(errs, cg.remove())
	}
	for _, e := range entries {
		if ns := (&netns{name: filepath.Base(dir) + "-" + e.Name()}); isFile(ns.path()) {
			errs = append(errs, ns.remove())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing what the stale cluster %s left: %w", dir, err)
	}
	return removeUnmounted(dir)
}

func isFile(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
