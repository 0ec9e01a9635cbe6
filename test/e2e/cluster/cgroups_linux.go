package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// cgroupHierarchies returns the directories of the cgroup hierarchies: the
// one of cgroup v2, or each of cgroup v1 (a hybrid layout's v2 hierarchy
// too), and whether they are v1.
func cgroupHierarchies() ([]string, bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupMount, &st); err != nil {
		return nil, false, err
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return []string{cgroupMount}, false, nil
	}
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, false, err
	}
	var hierarchies []string
	for _, e := range entries {
		// cpu,cpuacct and the like are symbolic links to one mount.
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			hierarchies = append(hierarchies, filepath.Join(cgroupMount, e.Name()))
		}
	}
	return hierarchies, true, nil
}

// existingCgroupRoot returns the cgroup name where it exists, for a sweep.
func existingCgroupRoot(name string) (*cgroupRoot, error) {
	hierarchies, _, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	r := &cgroupRoot{name: "/" + name}
	for _, h := range hierarchies {
		if dir := filepath.Join(h, name); isDir(dir) {
			r.dirs = append(r.dirs, dir)
		}
	}
	return r, nil
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// killAll kills every process in the cgroups and waits until they are
// empty.
func (r *cgroupRoot) killAll() error {
	deadline := time.Now().Add(stopGrace)
	for {
		var pids []int
		for _, top := range r.dirs {
			filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived SIGKILL", pids, r.name)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pollInterval)
	}
}

// newCgroupRoot creates the cgroup name in every hierarchy.
func newCgroupRoot(name string) (*cgroupRoot, error) {
	hierarchies, v1, err := cgroupHierarchies()
	if err != nil {
		return nil, err
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
			if data, err := os.ReadFile(filepath.Join(h, file)); err == nil && v1 {
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
