// Package pauseimage builds the sandbox image a test node's containerd
// starts first in every Pod (its "pause" image, containerd's
// sandbox_image). Test machines pull nothing from public registries, so
// the image is built from this repository the way the manager image is
// (package ccmimage): a static Go program that waits for a signal, in a
// single reproducible layer.
package pauseimage

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmccm/wasmccm/internal/ccmimage"
)

const (
	// Ref names the image. It is fully qualified (a registry host with a
	// dot) so that containerd's CRI plugin, which normalizes short names
	// to docker.io, finds it under the name it was imported with.
	Ref = "wasmccm.local/pause:test"
	// Package is the pause program, relative to the module root.
	Package = "./internal/pauseimage/pause"
	// binaryPath is the program inside the image.
	binaryPath = "pause"
	// user is the conventional user of pause images: the program needs no
	// privilege at all.
	user = "65535:65535"
)

// Build compiles the pause program for this machine's architecture, the only
// one a local test node runs, and returns it as an image index. workDir
// receives the binary.
func Build(repoRoot, workDir string) (v1.ImageIndex, error) {
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	bin := filepath.Join(workDir, "pause")
	if err := ccmimage.Compile(repoRoot, Package, p, bin); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	img, err := ccmimage.SingleLayer(p, map[string]ccmimage.File{binaryPath: {Mode: 0o755, Data: data}}, v1.Config{
		User:       user,
		Entrypoint: []string{"/" + binaryPath},
		WorkingDir: "/",
	})
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}}), nil
}
