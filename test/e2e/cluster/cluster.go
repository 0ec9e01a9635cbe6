// Package cluster runs a throwaway Kubernetes cluster for end-to-end tests
// of the cloud controller manager.
//
// By default only etcd and kube-apiserver are started: no scheduler,
// controller manager or kubelet. Node objects are created by the tests
// themselves, which is exactly what a cloud controller manager reacts to.
// With Options.Nodes the cluster is a real one on this machine:
// kube-controller-manager, kube-scheduler and, per Node, containerd and a
// kubelet (see NodeOptions); StartContainerd runs a containerd alone.
// Everything listens on loopback with free ports and keeps its state in a
// temporary directory, so clusters in parallel tests do not interfere.
//
// The binaries are built once by hack/install-e2e-deps.sh and, for Nodes,
// hack/install-node-deps.sh.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeVersion is the Kubernetes release whose binaries are used by default.
// It matches the k8s.io/* library versions in go.mod and the default of the
// install scripts, WASMCCM_KUBE_VERSION of hack/lib.sh (TestKubeVersion
// checks both).
const KubeVersion = "v1.37.2"

// versionEnv names an older release to run instead of KubeVersion, such as
// v1.36.3 for the skew job of hack/test.sh: the manager, built on the
// libraries of KubeVersion, must keep working against the API server one
// minor behind. `KUBE_VERSION=<release> hack/install-e2e-deps.sh` builds
// its binaries (hack/install-e2e-deps.sh builds the skew job's by default).
const versionEnv = "WASMCCM_E2E_KUBE_VERSION"

// Version returns the Kubernetes release the tests run: $WASMCCM_E2E_KUBE_VERSION
// if set, else KubeVersion.
func Version() string {
	if v := os.Getenv(versionEnv); v != "" {
		return v
	}
	return KubeVersion
}

// dirPrefix names the temporary directory of each cluster.
const dirPrefix = "wasmccm-e2e-cluster-"

// Options configures Start.
type Options struct {
	// BinDir holds the kube-apiserver and etcd binaries. Empty means
	// DefaultBinDir().
	BinDir string
	// Nodes, when set, adds real Nodes (see NodeOptions).
	Nodes *NodeOptions
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Config authenticates as an admin in group system:masters. It is
	// shared: use rest.CopyConfig before changing it.
	Config *rest.Config

	opts      Options
	dir       string
	etcd      *process
	apiserver *process
	stopOnce  sync.Once
	stopErr   error

	// With Options.Nodes only.
	controllerManager        *process
	scheduler                *process
	nodes                    []*node
	removeKubeletDefaultRoot bool
}

// DefaultBinDir returns $WASMCCM_E2E_BIN if set, else the directory where
// hack/install-e2e-deps.sh caches the binaries for Version().
func DefaultBinDir() string {
	if dir := os.Getenv("WASMCCM_E2E_BIN"); dir != "" {
		return dir
	}
	return filepath.Join(cacheRoot(), "k8s", Version(), "bin")
}

// cacheRoot is where the hack/install-*.sh scripts cache what they build.
func cacheRoot() string {
	if cache := os.Getenv("WASMCCM_CACHE"); cache != "" {
		return cache
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "wasmccm")
}

// CheckBinaries reports, with the command that fixes it, whether binDir
// lacks one of the binaries Start needs.
func CheckBinaries(binDir string) error {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		path := filepath.Join(binDir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing or not executable: run KUBE_VERSION=%s hack/install-e2e-deps.sh "+
				"(or set WASMCCM_E2E_BIN to a directory holding etcd and kube-apiserver)", path, Version())
		}
	}
	return nil
}

// Start launches etcd and then kube-apiserver and returns once the API
// server reports ready. ctx bounds only the startup; the processes run until
// Stop. On failure nothing is left running and the error carries the tail of
// the logs.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir := opts.BinDir
	if binDir == "" {
		binDir = DefaultBinDir()
	}
	if err := CheckBinaries(binDir); err != nil {
		return nil, err
	}
	if opts.Nodes != nil {
		nodes := *opts.Nodes
		if nodes.BinDir == "" {
			nodes.BinDir = DefaultNodeBinDir()
		}
		if err := CheckNodeBinaries(nodes.BinDir); err != nil {
			return nil, err
		}
		opts.Nodes = &nodes
		if err := sweepStale(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: dir}
	if err := c.start(ctx, binDir); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// start runs both processes in turn. The API server is only started once
// etcd is healthy so that a broken etcd is reported as such rather than as
// an API server that never became ready.
func (c *Cluster) start(ctx context.Context, binDir string) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := loopbackURL("http", ports[0])
	c.etcd, err = startEtcd(binDir, c.dir, etcdURL, loopbackURL("http", ports[1]))
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, c.etcd, etcdURL+"/health"); err != nil {
		return fmt.Errorf("etcd did not become healthy: %w", err)
	}
	files, err := writeAPIServerFiles(c.dir, c.nodeNames())
	if err != nil {
		return err
	}
	host := loopbackURL("https", ports[2])
	c.apiserver, err = startAPIServer(binDir, c.dir, ports[2], etcdURL, files)
	if err != nil {
		return err
	}
	c.Config, err = waitAPIServer(ctx, c.apiserver, host, files)
	if err != nil {
		return fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}
	if want := os.Getenv(versionEnv); want != "" {
		// A skew run that silently ran the default release would prove
		// nothing.
		if err := checkServerVersion(c.Config, want); err != nil {
			return err
		}
	}
	if c.opts.Nodes != nil {
		return c.startNodes(ctx, files)
	}
	return nil
}

// checkServerVersion fails unless the API server of cfg reports the release
// want.
func checkServerVersion(cfg *rest.Config, want string) error {
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	info, err := client.ServerVersion()
	if err != nil {
		return fmt.Errorf("kube-apiserver version: %w", err)
	}
	if info.GitVersion != want {
		return fmt.Errorf("kube-apiserver reports %s, but %s asks for %s", info.GitVersion, versionEnv, want)
	}
	return nil
}

// nodeNames returns the names of the Nodes to start, if any.
func (c *Cluster) nodeNames() []string {
	if c.opts.Nodes == nil {
		return nil
	}
	var names []string
	for _, n := range c.opts.Nodes.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// WriteKubeconfig writes a kubeconfig for the admin identity of Config to
// path, for processes such as the cloud controller manager binary.
func (c *Cluster) WriteKubeconfig(path string) error {
	return c.writeKubeconfig(path, c.Config.BearerToken)
}

// writeKubeconfig writes a kubeconfig authenticating with token.
func (c *Cluster) writeKubeconfig(path, token string) error {
	const name = "wasmccm-e2e"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   c.Config.Host,
		CertificateAuthorityData: c.Config.CAData,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// Stop stops the Nodes, if any, then the API server before etcd, so that
// the API server does not spend its shutdown retrying a vanished etcd, and
// then removes the temporary directory unless something is still mounted
// in it. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = errors.Join(
			c.stopNodes(),
			c.apiserver.stop(),
			c.etcd.stop(),
			removeUnmounted(c.dir),
		)
	})
	return c.stopErr
}
