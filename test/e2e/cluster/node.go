package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmccm/wasmccm/internal/ccmimage"
	"github.com/wasmccm/wasmccm/internal/pauseimage"
)

// NodeOptions turns the cluster into one with real Nodes on this machine:
// kube-controller-manager and kube-scheduler next to the API server, and per
// Node a network namespace, a containerd and a kubelet of its own, with
// --cloud-provider=external: it registers its Node tainted as
// uninitialized, waiting for a cloud controller manager. No CNI runs:
// Nodes stay NotReady, and only Pods on the host network that tolerate that
// can run.
type NodeOptions struct {
	// BinDir holds kubelet, kube-controller-manager and kube-scheduler.
	// Empty means DefaultNodeBinDir().
	BinDir string
	// RepoRoot is the module root the pause image is built from.
	RepoRoot string
	// Nodes to start. Each kubelet needs a containerd of its own: a kubelet
	// removes the containers of Pods it does not know.
	Nodes []Node
	// Images are OCI image layouts imported into each Node's containerd
	// before its kubelet starts, under the names they record: nothing can
	// be pulled.
	Images []string
	// Forward lists loopback addresses (host:port) of this machine that
	// Pods on the Nodes must reach, such as a simulated cloud: each Node's
	// network forwards them to the host. The API server's is always
	// forwarded.
	Forward []string
}

// Node is one Node of NodeOptions.
type Node struct {
	Name string
	// IP is the kubelet's --node-ip, the Node's address in its network
	// (not loopback, which a kubelet refuses). The cloud must report it
	// for the Node.
	IP string
}

// DefaultNodeBinDir returns the directory where hack/install-node-deps.sh
// caches kubelet, kube-controller-manager and kube-scheduler for Version():
// of the API server's release, as a kubelet newer than its API server is
// outside the supported skew.
func DefaultNodeBinDir() string {
	return filepath.Join(cacheRoot(), "node", Version(), "bin")
}

// CheckNodeBinaries reports, with the command that fixes it, what a
// cluster with Nodes lacks on this machine.
func CheckNodeBinaries(binDir string) error {
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		path := filepath.Join(binDir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing or not executable: run KUBE_VERSION=%s hack/install-node-deps.sh", path, Version())
		}
	}
	// The network namespaces of the Nodes.
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed (hack/install-node-deps.sh installs it): %w", tool, err)
		}
	}
	return CheckContainerd()
}

// node is one Node's network, containerd and kubelet.
type node struct {
	Node
	dir        string
	netns      *netns
	containerd *Containerd
	cgroup     *cgroupRoot
	kubelet    *process
}

// PodLogsDir returns the directory where the kubelet of Node name writes
// container logs (<namespace>_<pod>_<uid>/<container>/<restart>.log): they
// are read there, since the API server cannot reach a kubelet's log
// endpoint here.
func (c *Cluster) PodLogsDir(name string) string {
	return filepath.Join(c.dir, "nodes", name, "pod-logs")
}

// KubeletRootDir returns the --root-dir of the kubelet of Node name. A
// Pod's volumes are below it, as the kubelet lays them out
// (pods/<uid>/volumes/kubernetes.io~configmap/<volume>/...).
func (c *Cluster) KubeletRootDir(name string) string {
	return filepath.Join(c.dir, "nodes", name, "root")
}

// NodeLogTails returns the end of the logs of kube-controller-manager,
// kube-scheduler and each Node's containerd and kubelet, for a failing
// test to print before Stop removes them.
func (c *Cluster) NodeLogTails() string {
	procs := []*process{c.controllerManager, c.scheduler}
	for _, n := range c.nodes {
		if n.containerd != nil {
			procs = append(procs, n.containerd.proc)
		}
		procs = append(procs, n.kubelet)
	}
	var b strings.Builder
	for _, p := range procs {
		if p != nil {
			b.WriteString(p.logTail())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Leftovers reports what a stopped cluster left behind: processes that
// refer to its directory by command line or root (daemons, shims,
// containers), mounts below it, and its Nodes' network namespaces, cgroups
// and container log links. It is how tests check Stop; StartForTest and
// StartWithNodesForTest check it after every test, passed or failed.
func (c *Cluster) Leftovers() error {
	return leftovers(c.dir)
}

// kubeletDefaultRoot is where a kubelet puts its device plugin socket
// (device-plugins/kubelet.sock) whatever its --root-dir. Where the
// directory did not exist before the Nodes started, stopNodes removes what
// they created there.
const kubeletDefaultRoot = "/var/lib/kubelet"

// startNodes starts kube-controller-manager and kube-scheduler, then each
// Node, and waits until every kubelet has registered its Node.
func (c *Cluster) startNodes(ctx context.Context, files apiServerFiles) error {
	opts := c.opts.Nodes
	binDir := opts.BinDir
	if _, err := os.Stat(kubeletDefaultRoot); errors.Is(err, os.ErrNotExist) {
		c.removeKubeletDefaultRoot = true
	}
	admin := filepath.Join(c.dir, "admin.kubeconfig")
	if err := c.WriteKubeconfig(admin); err != nil {
		return err
	}
	var err error
	c.controllerManager, err = startProcess("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), c.dir, []string{
		"--kubeconfig=" + admin,
		// Nothing scrapes them; a fixed port would collide.
		"--secure-port=0",
		"--leader-elect=false",
		// Its default controllers include no cloud loop: those of 1.36 are
		// stubs that do nothing (KEP-2395), and 1.37 removed them and
		// refuses their names in --controllers.
		// Signs the legacy token Secrets and publishes kube-root-ca.crt,
		// which every Pod's service-account volume needs.
		"--service-account-private-key-file=" + files.saKey,
		"--root-ca-file=" + filepath.Join(files.certDir, "apiserver.crt"),
		// Pod CIDRs for the Nodes, as the manifests' --cluster-cidr expects:
		// the cloud controller manager's route controller acts on them.
		"--allocate-node-cidrs=true",
		"--cluster-cidr=10.244.0.0/16",
	})
	if err != nil {
		return err
	}
	c.scheduler, err = startProcess("kube-scheduler", filepath.Join(binDir, "kube-scheduler"), c.dir, []string{
		"--kubeconfig=" + admin,
		"--secure-port=0",
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	pause, err := c.buildPauseImage(opts.RepoRoot)
	if err != nil {
		return err
	}
	for _, spec := range opts.Nodes {
		n := &node{Node: spec, dir: filepath.Join(c.dir, "nodes", spec.Name)}
		c.nodes = append(c.nodes, n)
		if err := c.startNode(ctx, n, binDir, files.nodeTokens[n.Name], append([]string{pause}, opts.Images...)); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, n := range c.nodes {
		err := poll(ctx, n.kubelet, func(ctx context.Context) error {
			_, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("kubelet did not register Node %s: %w", n.Name, err)
		}
	}
	return nil
}

// buildPauseImage builds the pause image as an OCI layout and returns its
// directory.
func (c *Cluster) buildPauseImage(repoRoot string) (string, error) {
	work := filepath.Join(c.dir, "pause")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	idx, err := pauseimage.Build(repoRoot, work)
	if err != nil {
		return "", err
	}
	layout := filepath.Join(work, "layout")
	return layout, ccmimage.WriteLayout(layout, pauseimage.Ref, idx)
}

// startNode creates n's network, starts its containerd, imports images
// into the namespace the kubelet uses, and starts the kubelet with a token
// of n's identity.
func (c *Cluster) startNode(ctx context.Context, n *node, binDir, token string, images []string) error {
	for _, d := range []string{"root", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	// Named after the cluster's directory, so that Leftovers finds it.
	unique := filepath.Base(c.dir) + "-" + n.Name
	var err error
	if n.netns, err = newNetns(unique, n.IP); err != nil {
		return err
	}
	for _, addr := range append([]string{strings.TrimPrefix(c.Config.Host, "https://")}, c.opts.Nodes.Forward...) {
		if err := n.netns.forward(addr); err != nil {
			return err
		}
	}
	n.containerd, err = StartContainerd(ctx, n.dir, ContainerdOptions{SandboxImage: pauseimage.Ref, netns: n.netns})
	if err != nil {
		return err
	}
	// The CRI plugin serves the kubelet from this namespace.
	for _, layout := range images {
		if err := n.containerd.ImportLayout(ctx, "k8s.io", layout); err != nil {
			return err
		}
	}
	if n.cgroup, err = newCgroupRoot(unique); err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, token); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	config := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(kubeletConfig(n, ports[0], ports[1])), 0o644); err != nil {
		return err
	}
	binary, args := n.netns.wrap(filepath.Join(binDir, "kubelet"), []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "root"),
		// Its self-signed serving certificate; the default is under
		// /var/lib/kubelet whatever --root-dir says. (The device plugin
		// socket, /var/lib/kubelet/device-plugins/kubelet.sock, cannot be
		// moved; nothing uses it here.)
		"--cert-dir=" + filepath.Join(n.dir, "root", "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		// Registers the Node with the uninitialized taint, for the cloud
		// controller manager to initialize.
		"--cloud-provider=external",
	})
	n.kubelet, err = startProcess("kubelet-"+n.Name, binary, c.dir, args)
	return err
}

// kubeletConfig is the KubeletConfiguration of n. Each setting departs
// from the default for this kind of machine or for a test, as said.
func kubeletConfig(n *node, port, healthzPort int) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://` + n.containerd.Socket + `
# Loopback of its network; nothing but this test may reach the kubelet.
address: 127.0.0.1
port: ` + strconv.Itoa(port) + `
healthzBindAddress: 127.0.0.1
healthzPort: ` + strconv.Itoa(healthzPort) + `
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# No systemd runs here; containerd uses cgroupfs too.
cgroupDriver: cgroupfs
cgroupRoot: ` + n.cgroup.name + `
# Test machines may still have cgroup v1 (or a hybrid layout), which the
# kubelet otherwise refuses; it runs on v2 as well.
failCgroupV1: false
failSwapOn: false
# Inside the test directory rather than under /var.
podLogsDir: ` + filepath.Join(n.dir, "pod-logs") + `
volumePluginDir: ` + filepath.Join(n.dir, "volume-plugins") + `
# A shared CI disk may well be more than 85% full; the test's Pods must not
# be evicted for it.
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`
}

// stopNodes stops the kubelets, their containerds with every container,
// and the scheduler and controller manager, in that order: nothing that
// starts containers may outlive containerd.
func (c *Cluster) stopNodes() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.kubelet.stop())
	}
	for _, n := range c.nodes {
		if n.containerd != nil {
			errs = append(errs, n.containerd.Stop())
		}
		errs = append(errs, n.cgroup.remove(), n.netns.remove())
	}
	errs = append(errs, c.scheduler.stop(), c.controllerManager.stop())
	if len(c.nodes) > 0 {
		errs = append(errs, removeLinksInto(containerLogLinks, c.dir))
	}
	if c.removeKubeletDefaultRoot {
		// Only what the kubelets create there: removing a directory that
		// is not empty fails, and then it stays.
		for _, path := range []string{"device-plugins/kubelet.sock", "device-plugins", ""} {
			if err := os.Remove(filepath.Join(kubeletDefaultRoot, path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
