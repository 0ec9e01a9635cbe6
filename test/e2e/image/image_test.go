// Package image_test checks the manager image built by internal/ccmimage
// (`make image`) the way a container runtime sees it: unpacked from its OCI
// layout, with its own user and entrypoint, against a real API server.
package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/ccmimage"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

const repoRoot = "../../.."

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the manager; skipped with -short")
	}
	dir := t.TempDir()
	// The host's platform only: the image a test can run. The index of
	// every platform `make image` builds is checked from stand-in binaries
	// by internal/ccmimage's TestIndex, without compiling for each.
	host := ccmimage.HostPlatform()
	platforms := []v1.Platform{host}
	idx, err := ccmimage.Build(ccmimage.Options{RepoRoot: repoRoot, Platforms: platforms})
	if err != nil {
		t.Fatal(err)
	}
	// Written and read back as an OCI layout: what `make image` leaves and
	// `ctr images import` reads.
	const ref = "wasmccm/wasm-cloud-controller-manager:test"
	if err := ccmimage.WriteLayout(filepath.Join(dir, "layout"), ref, idx); err != nil {
		t.Fatal(err)
	}
	idx = readLayout(t, filepath.Join(dir, "layout"), ref)

	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || !manifest.Manifests[0].Platform.Equals(host) {
		t.Fatalf("index manifests %+v, want one for %s", manifest.Manifests, host)
	}
	t.Run("reproducible", func(t *testing.T) {
		// Built again: the same commit must give the same digest
		// (ccmimage fixes every time and trims build paths).
		again, err := ccmimage.Build(ccmimage.Options{RepoRoot: repoRoot, Platforms: platforms})
		if err != nil {
			t.Fatal(err)
		}
		againManifest, err := again.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := againManifest.Manifests[0].Digest, manifest.Manifests[0].Digest; got != want {
			t.Errorf("second build for %s: digest %s, first %s", host, got, want)
		}
	})

	root := filepath.Join(dir, "rootfs")
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != host.Architecture || cfg.OS != host.OS {
		t.Errorf("config platform %s/%s, want %s", cfg.OS, cfg.Architecture, host)
	}
	if cfg.Config.User != ccmimage.User {
		t.Errorf("user %q, want %q", cfg.Config.User, ccmimage.User)
	}
	if want := []string{"/" + ccmimage.BinaryPath}; !slices.Equal(cfg.Config.Entrypoint, want) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want %q and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd, want)
	}
	wantFiles := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", ccmimage.CAPath, "usr/", "usr/local/", "usr/local/bin/", ccmimage.BinaryPath}
	if got := unpack(t, img, root); !slices.Equal(got, wantFiles) {
		t.Errorf("files %q, want exactly %q", got, wantFiles)
	}
	if t.Failed() {
		return
	}
	// The host's image, run from its unpacked root: the entrypoint as the
	// runtime would start it.
	entrypoint := filepath.Join(root, ccmimage.BinaryPath)
	t.Run("version", func(t *testing.T) {
		out := run(t, entrypoint, "--version")
		// component-base's version flag: "Kubernetes v<version>".
		if !strings.HasPrefix(out, "Kubernetes v") {
			t.Errorf("--version printed %q", out)
		}
	})
	t.Run("help", func(t *testing.T) {
		out := run(t, entrypoint, "--help")
		for _, flag := range []string{"--cloud-config", "--cloud-provider", "--leader-elect"} {
			if !strings.Contains(out, flag) {
				t.Errorf("--help does not mention %s", flag)
			}
		}
	})
	t.Run("start", func(t *testing.T) { testStart(t, entrypoint) })
	t.Run("containerd", func(t *testing.T) { testContainerd(t, filepath.Join(dir, "layout"), ref) })
}

// testContainerd imports the layout into a containerd of its own (package
// cluster: the host's containerd, if any, is untouched) and runs the
// entrypoint with runc, as a node would. It needs root and containerd,
// ctr and runc (hack/install-node-deps.sh, which `make test` runs): without
// them it is skipped, unless WASMCCM_E2E is set, as in CI, where that is a
// failure.
func testContainerd(t *testing.T, layoutDir, ref string) {
	ctx := context.Background()
	c := cluster.StartContainerdForTest(t, cluster.ContainerdOptions{})
	const namespace = "image-test"
	ctr := func(args ...string) string {
		t.Helper()
		out, err := c.Ctr(ctx, namespace, args...)
		if err != nil {
			t.Fatalf("%v\ncontainerd:\n%s", err, c.LogTail())
		}
		return out
	}
	if err := c.ImportLayout(ctx, namespace, layoutDir); err != nil {
		t.Fatal(err)
	}
	// ctr replaces the image's entrypoint with the arguments after the
	// container ID, so the entrypoint is named again. --rm removes the
	// container, its task and its rootfs mount before ctr returns.
	out := ctr("run", "--rm", "--runc-root", c.RuncRoot(), ref, "version", "/"+ccmimage.BinaryPath, "--version")
	if !strings.HasPrefix(out, "Kubernetes v") {
		t.Errorf("--version in containerd printed %q", out)
	}
	// The runtime spec containerd derives from the image runs the process
	// as the image's user, not root.
	ctr("containers", "create", ref, "spec")
	defer ctr("containers", "rm", "spec")
	if out := ctr("containers", "info", "spec"); !strings.Contains(out, `"uid": 65532`) || !strings.Contains(out, `"gid": 65532`) {
		t.Errorf("container spec does not run as 65532:65532:\n%s", out)
	}
}

// testStart runs the image's binary against a real API server with the
// simcloud module and waits until it holds the leader Lease: the manager
// loaded the module and reached the API.
func testStart(t *testing.T, entrypoint string) {
	c := cluster.StartForTest(t)
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	module, err := wasmbuild.Build(filepath.Join(repoRoot, "modules/simcloud/module"), wasmbuild.Go)
	if err != nil {
		t.Fatal(err)
	}
	cloud := httptest.NewServer(simcloud.New(simcloud.Options{}).Handler())
	t.Cleanup(cloud.Close)
	config := filepath.Join(dir, "cloud-config.yaml")
	writeFile(t, config, fmt.Sprintf(`clusterName: image
module: {path: %s}
http: {allowedOrigins: [%q]}
providerConfig: {endpoint: %q}
`, module, cloud.URL, cloud.URL))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(entrypoint,
		"--cloud-provider=wasm", "--cloud-config="+config,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--cluster-name=image", "--leader-elect=true", "--leader-elect-resource-namespace=default",
		"--use-service-account-credentials=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--controllers=cloud-node")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("manager exited: %v", err)
		default:
		}
		lease, err := client.CoordinationV1().Leases("default").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatalf("waiting for the leader Lease: %v\n%s", err, tail(logs.String(), 40))
	}
}

func readLayout(t *testing.T, dir, ref string) v1.ImageIndex {
	t.Helper()
	l, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[ccmimage.RefNameAnnotation] != ref {
		t.Fatalf("layout index.json: want one index named %s, got %+v", ref, m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// unpack extracts img's only layer to root and returns the names in the
// layer, in order. Owners must be root and times fixed.
func unpack(t *testing.T, img v1.Image, root string) []string {
	t.Helper()
	entries, err := ccmimage.Entries(img)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		hdr := e.Header
		names = append(names, hdr.Name)
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(ccmimage.Epoch) {
			t.Errorf("%s: owner %d:%d, time %v; want root and %v", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, ccmimage.Epoch)
		}
		target := filepath.Join(root, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = os.WriteFile(target, e.Data, os.FileMode(hdr.Mode))
		default:
			err = fmt.Errorf("%s: unexpected type %c", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func run(t *testing.T, binary string, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(binary), args, err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
