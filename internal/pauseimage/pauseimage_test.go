package pauseimage_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/internal/pauseimage"
)

// TestBuild checks the image a node's containerd starts for each Pod
// sandbox: one platform, this machine's, running /pause as an unprivileged
// user; and that the program waits for a signal and exits on it.
func TestBuild(t *testing.T) {
	work := t.TempDir()
	idx, err := pauseimage.Build("../..", work)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform.Architecture != runtime.GOARCH || m.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("index manifests %+v, want one for linux/%s", m.Manifests, runtime.GOARCH)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) || cfg.Config.User != "65535:65535" {
		t.Errorf("entrypoint %q user %q, want /pause as 65535:65535", cfg.Config.Entrypoint, cfg.Config.User)
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			if runtime.GOOS != "linux" {
				t.Skip("the pause binary is built for Linux")
			}
			cmd := exec.Command(filepath.Join(work, "pause"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				t.Fatalf("pause exited before any signal: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("pause exited with %v on %v, want 0", err, sig)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("pause still runs 10s after %v", sig)
			}
		})
	}
}
