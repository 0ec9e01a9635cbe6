package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// cgroupMount is where the cgroup hierarchies are mounted.
const cgroupMount = "/sys/fs/cgroup"

// cgroupRoot is a cgroup of its own for one kubelet's Pods (its
// cgroupRoot): a kubelet removes, processes included, the Pod cgroups it
// finds under its root that are not its own Pods', so two kubelets on one
// host must not share one; and the cgroups a kubelet leaves can all be
// removed with it.
type cgroupRoot struct {
	name string   // as the kubelet takes it: "/<name>"
	dirs []string // the directory in each hierarchy
}

// newCgroupRoot creates the cgroup name in every hierarchy: the one of
// cgroup v2, or each of cgroup v1 (a hybrid layout's v2 hierarchy too).
func newCgroupRoot(name string) (*cgroupRoot, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupMount, &st); err != nil {
		return nil, err
	}
	const cgroup2Magic = 0x63677270
	hierarchies := []string{cgroupMount}
	if st.Type != cgroup2Magic {
		entries, err := os.ReadDir(cgroupMount)
		if err != nil {
			return nil, err
		}
		hierarchies = nil
		for _, e := range entries {
			// cpu,cpuacct and the like are symbolic links to one mount.
			if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				hierarchies = append(hierarchies, filepath.Join(cgroupMount, e.Name()))
			}
		}
	}
	r := &cgroupRoot{name: "/" + name}
	for _, h := range hierarchies {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, errors.Join(err, r.remove())
		}
		r.dirs = append(r.dirs, dir)
		// A v1 cpuset cgroup admits no process until it has CPUs and
		// memory nodes; it gets its parent's.
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			if data, err := os.ReadFile(filepath.Join(h, file)); err == nil && st.Type != cgroup2Magic {
				if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
					return nil, errors.Join(err, r.remove())
				}
			}
		}
	}
	return r, nil
}

// remove removes the cgroups, their children first. A cgroup that still
// holds a process cannot be removed, and that is reported.
func (r *cgroupRoot) remove() error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, top := range r.dirs {
		var dirs []string
		err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
