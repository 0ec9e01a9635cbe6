package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The containerd and runc releases hack/install-node-deps.sh builds by
// default: containerd 2.1 or later is what mounts image volumes.
const (
	ContainerdVersion = "v2.4.2"
	RuncVersion       = "v1.5.3"
)

// nodeToolDir is where hack/install-node-deps.sh caches the release
// version of the tool name.
func nodeToolDir(name, version string) string {
	return filepath.Join(cacheRoot(), "node", name+"-"+version, "bin")
}

// containerdTools are the programs a Containerd runs, by the directory
// they are cached in: the daemon, its client, the runc shim, and runc
// itself.
func containerdTools() map[string][]string {
	return map[string][]string{
		nodeToolDir("containerd", ContainerdVersion): {"containerd", "ctr", "containerd-shim-runc-v2"},
		nodeToolDir("runc", RuncVersion):             {"runc"},
	}
}

// containerdPath is the PATH containerd runs with: the cached tools first.
// containerd finds its shim, and the shim runc, on PATH, where the
// machine's own (Debian's containerd 1.6, say) must not come first.
func containerdPath() string {
	dirs := slices.Sorted(maps.Keys(containerdTools()))
	return strings.Join(append(dirs, os.Getenv("PATH")), string(os.PathListSeparator))
}

// CheckContainerd reports, with the command that fixes it, why
// StartContainerd cannot run here.
func CheckContainerd() error {
	if os.Geteuid() != 0 {
		return errors.New("containerd needs root")
	}
	for dir, tools := range containerdTools() {
		for _, tool := range tools {
			path := filepath.Join(dir, tool)
			if info, err := os.Stat(path); err != nil || info.Mode()&0o111 == 0 {
				return fmt.Errorf("%s is missing or not executable: run hack/install-node-deps.sh", path)
			}
		}
	}
	return nil
}

// ContainerdOptions configures StartContainerd.
type ContainerdOptions struct {
	// SandboxImage is the CRI plugin's sandbox ("pause") image. It must be
	// imported into the k8s.io namespace before the first Pod starts.
	// Empty keeps containerd's default, which would be pulled.
	SandboxImage string

	// netns, when set, is the network containerd runs in, and with it the
	// containers on the host network.
	netns *netns
}

// Containerd is a containerd daemon of its own: configuration, root, state
// and socket all lie in one directory, so the host's containerd, if any,
// is untouched, and everything this one leaves (tasks, shims, mounts) can be
// found and removed by Stop.
type Containerd struct {
	// Socket is the address of its API, for ctr and for the kubelet's
	// container runtime endpoint.
	Socket string

	dir          string
	ctr          string // its client, beside the daemon
	sandboxImage string
	proc         *process
}

// StartContainerd starts containerd in dir, which must exist, and returns
// once its API answers. The settings it writes are those this kind of
// machine needs; each is explained where it is set.
func StartContainerd(ctx context.Context, dir string, opts ContainerdOptions) (*Containerd, error) {
	if err := CheckContainerd(); err != nil {
		return nil, err
	}
	c := &Containerd{
		Socket: filepath.Join(dir, "containerd.sock"), dir: dir, sandboxImage: opts.SandboxImage,
		ctr: filepath.Join(nodeToolDir("containerd", ContainerdVersion), "ctr"),
	}
	config := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(c.config(opts)), 0o644); err != nil {
		return nil, err
	}
	var err error
	binary, args := opts.netns.wrap(filepath.Join(filepath.Dir(c.ctr), "containerd"), []string{"--config", config})
	c.proc, err = startProcess("containerd", binary, dir, args, "PATH="+containerdPath())
	if err != nil {
		return nil, err
	}
	err = poll(ctx, c.proc, func(ctx context.Context) error {
		_, err := c.Ctr(ctx, "default", "version")
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("containerd did not answer: %w", err), c.Stop())
	}
	return c, nil
}

// config is containerd's configuration (version 3, containerd 2.x).
func (c *Containerd) config(opts ContainerdOptions) string {
	var images strings.Builder
	if opts.SandboxImage != "" {
		fmt.Fprintf(&images, "  [plugins.'io.containerd.cri.v1.images'.pinned_images]\n    sandbox = %q\n", opts.SandboxImage)
	}
	return fmt.Sprintf(`version = 3
root = %q
state = %q
# Not the host's drop-in directory (/etc/containerd/conf.d).
imports = []
[grpc]
  address = %q
[ttrpc]
  address = %q
# No metrics or debug listener: nothing reads them, and a fixed port would
# collide with another containerd.
[metrics]
  address = ""
[plugins.'io.containerd.internal.v1.opt']
  path = %q
# NRI listens on a fixed socket (/var/run/nri/nri.sock), which another
# containerd may hold; nothing here uses it.
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images']
%s[plugins.'io.containerd.cri.v1.runtime']
  # Root may lack CAP_SYS_RESOURCE (it does on some VMs), and then runc
  # fails to lower a container's oom_score_adj below its own ("can't get
  # final child's PID from pipe"). With this, containers never get a lower
  # score than containerd: correct for tests, and harmless elsewhere.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    # No CNI: Pods of a test node use the host network. Empty directories
    # of its own keep the host's CNI configuration, if any, out.
    bin_dirs = [%q]
    conf_dir = %q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        # cgroupfs, as the kubelet is configured: no systemd runs here.
        SystemdCgroup = false
        # runc's state of the Pods' containers, in the directory rather
        # than in /run/containerd/runc.
        Root = %q
[plugins.'io.containerd.grpc.v1.cri']
  # The streaming server (exec, attach, port-forward) on an ephemeral
  # loopback port, never a fixed one.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(c.dir, "root"), filepath.Join(c.dir, "state"), c.Socket, c.Socket+".ttrpc",
		filepath.Join(c.dir, "opt"), images.String(), filepath.Join(c.dir, "cni-bin"), filepath.Join(c.dir, "cni-conf"),
		c.RuncRoot())
}

// RuncRoot is where runc keeps the state of this containerd's containers.
// The CRI plugin's runtime uses it; `ctr run` must be given it
// (--runc-root), or it shares /run/containerd/runc with every other
// containerd, and a container ID another one runs at the same time fails
// to start.
func (c *Containerd) RuncRoot() string { return filepath.Join(c.dir, "runc") }

// ctrTimeout bounds one ctr command.
const ctrTimeout = time.Minute

// Ctr runs ctr against this containerd in namespace and returns its
// standard output; an error quotes its standard error too. (ctr logs
// warnings there, such as containerd 2's deprecation of cgroup v1, which
// must not mix with what callers parse.)
func (c *Containerd) Ctr(ctx context.Context, namespace string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ctrTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.ctr, append([]string{"--address", c.Socket, "--namespace", namespace}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// ImportLayout imports the OCI image layout at layoutDir into namespace
// with all its platforms, as `ctr images import --all-platforms` of its tar
// archive: the image is then known under the name the layout records.
func (c *Containerd) ImportLayout(ctx context.Context, namespace, layoutDir string) error {
	archive, err := os.CreateTemp(c.dir, "image-*.tar")
	if err != nil {
		return err
	}
	archive.Close()
	defer os.Remove(archive.Name())
	if out, err := exec.CommandContext(ctx, "tar", "-C", layoutDir, "-cf", archive.Name(), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar %s: %w\n%s", layoutDir, err, out)
	}
	_, err = c.Ctr(ctx, namespace, "images", "import", "--all-platforms", archive.Name())
	return err
}

// LogTail returns the end of containerd's log, for error messages.
func (c *Containerd) LogTail() string { return c.proc.logTail() }

// Stop removes every task and container in every namespace, stops
// containerd and then removes what outlives it by design: shims (each
// runs detached, naming this containerd's socket on its command line) and
// mounts under the directory (container root filesystems, sandbox /dev/shm).
// It is safe on a partly started Containerd and returns every failure.
func (c *Containerd) Stop() error {
	var errs []error
	if c.proc != nil && c.proc.exited() == nil {
		errs = append(errs, c.removeContainers())
	}
	errs = append(errs, c.proc.stop(), killReferencing(c.Socket), unmountUnder(c.dir))
	return errors.Join(errs...)
}

// removeContainers kills every task, waits until they have stopped, and
// deletes them and their containers with their snapshots, in every
// namespace. Tasks of Pod sandboxes are deleted last: a Pod's containers
// share the sandbox's shim, which exits with the sandbox's task.
func (c *Containerd) removeContainers() error {
	ctx := context.Background()
	out, err := c.Ctr(ctx, "default", "namespaces", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range strings.Fields(out) {
		errs = append(errs, c.removeContainersIn(ctx, ns))
	}
	return errors.Join(errs...)
}

func (c *Containerd) removeContainersIn(ctx context.Context, ns string) error {
	// CONTAINER IMAGE RUNTIME
	list, err := c.Ctr(ctx, ns, "containers", "list")
	if err != nil {
		return err
	}
	var ids, sandboxes []string
	for _, line := range strings.Split(list, "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if fields[1] == c.sandboxImage {
			sandboxes = append(sandboxes, fields[0])
		} else {
			ids = append(ids, fields[0])
		}
	}
	ids = append(ids, sandboxes...)
	var errs []error
	for _, id := range ids {
		// Fails for a container without a task, which is fine.
		_, _ = c.Ctr(ctx, ns, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		if err := c.waitStopped(ctx, ns, id); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range ids {
		if c.hasTask(ctx, ns, id) {
			_, err := c.Ctr(ctx, ns, "tasks", "delete", id)
			errs = append(errs, err)
		}
		_, err := c.Ctr(ctx, ns, "containers", "delete", id)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// taskStatus returns the status of the task of container id ("RUNNING",
// "STOPPED"...), or "" when it has none.
func (c *Containerd) taskStatus(ctx context.Context, ns, id string) string {
	// TASK PID STATUS
	out, err := c.Ctr(ctx, ns, "tasks", "list")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n")[1:] {
		if fields := strings.Fields(line); len(fields) == 3 && fields[0] == id {
			return fields[2]
		}
	}
	return ""
}

func (c *Containerd) hasTask(ctx context.Context, ns, id string) bool {
	return c.taskStatus(ctx, ns, id) != ""
}

// waitStopped waits until the task of container id, if any, has stopped.
func (c *Containerd) waitStopped(ctx context.Context, ns, id string) error {
	deadline := time.Now().Add(stopGrace)
	for {
		switch status := c.taskStatus(ctx, ns, id); status {
		case "", "STOPPED":
			return nil
		default:
			if time.Now().After(deadline) {
				return fmt.Errorf("task %s/%s still %s after SIGKILL", ns, id, status)
			}
		}
		time.Sleep(pollInterval)
	}
}
