// Package ccmimage assembles the wasm-cloud-controller-manager container
// image with Go tooling alone: no Docker daemon, no base image pull.
//
// The image holds exactly two files, the static manager binary and the CA
// roots the module's HTTPS requests are verified against, and runs as the
// unprivileged user 65532. Every timestamp is fixed and the binary is built
// with -trimpath, so the same commit gives the same digest on any machine.
package ccmimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image. CAPath is where Go's crypto/x509 looks first on
// Linux, so no SSL_CERT_FILE is needed.
const (
	BinaryPath = "usr/local/bin/wasm-cloud-controller-manager"
	CAPath     = "etc/ssl/certs/ca-certificates.crt"
	// User is distroless' "nonroot": no entry in /etc/passwd is needed for a
	// numeric user.
	User = "65532:65532"
	// Package is the manager's main package, relative to the module root.
	Package = "./cmd/wasm-cloud-controller-manager"
	// DefaultCAFile is Debian's ca-certificates bundle.
	DefaultCAFile = "/etc/ssl/certs/ca-certificates.crt"
)

// Epoch is every timestamp in the image: file times and the config's
// creation time. A fixed value is what makes the digest reproducible.
var Epoch = time.Unix(0, 0).UTC()

// DefaultPlatforms are the architectures the index holds.
var DefaultPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// HostPlatform is linux on the architecture of the running program: the
// one image a test can run, so the one tests build when they only run it.
func HostPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// Options configures Build.
type Options struct {
	// RepoRoot is the module root the manager is built from.
	RepoRoot string
	// CAFile is the CA bundle copied into the image. Empty means
	// DefaultCAFile.
	CAFile string
	// Platforms to build. Empty means DefaultPlatforms.
	Platforms []v1.Platform
	// WorkDir receives the compiled binaries. Empty means a temporary
	// directory removed before Build returns.
	WorkDir string
}

// Build compiles the manager for each platform and returns the multi-arch
// OCI image index.
func Build(opts Options) (v1.ImageIndex, error) {
	if opts.CAFile == "" {
		opts.CAFile = DefaultCAFile
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	ca, err := os.ReadFile(opts.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read CA roots: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA roots %s: no PEM certificate in it", opts.CAFile)
	}
	work := opts.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "ccmimage-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	binaries := make([][]byte, len(opts.Platforms))
	for i, p := range opts.Platforms {
		bin := filepath.Join(work, p.OS+"-"+p.Architecture, path.Base(BinaryPath))
		if err := Compile(opts.RepoRoot, Package, p, bin); err != nil {
			return nil, err
		}
		if binaries[i], err = os.ReadFile(bin); err != nil {
			return nil, err
		}
	}
	return Index(opts.Platforms, binaries, ca)
}

// Index assembles the image index of Build from the manager already built
// for each platform, binaries[i] for platforms[i], and the CA roots. It is
// Build without the compiling, which is what lets the index of every
// platform be checked without compiling for each.
func Index(platforms []v1.Platform, binaries [][]byte, ca []byte) (v1.ImageIndex, error) {
	if len(binaries) != len(platforms) {
		return nil, fmt.Errorf("%d binaries for %d platforms", len(binaries), len(platforms))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, p := range platforms {
		img, err := Image(p, map[string]File{
			BinaryPath: {Mode: 0o755, Data: binaries[i]},
			CAPath:     {Mode: 0o644, Data: ca},
		})
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	return idx, nil
}

// Compile builds the main package pkg of the module at repoRoot into a
// static binary for p: CGO_ENABLED=0 needs no libc in the image, -trimpath
// keeps build paths out of it so it does not depend on where the repository
// is checked out.
func Compile(repoRoot, pkg string, p v1.Platform, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w\n%s", p.OS, p.Architecture, err, o)
	}
	return nil
}

// File is one regular file of the image.
type File struct {
	Mode int64
	Data []byte
}

// Image returns a single-layer image of files for platform p, with the
// manager as entrypoint.
func Image(p v1.Platform, files map[string]File) (v1.Image, error) {
	return SingleLayer(p, files, v1.Config{
		User:       User,
		Entrypoint: []string{"/" + BinaryPath},
		WorkingDir: "/",
	})
}

// SingleLayer returns an image of one layer holding files, for platform p,
// running as config says. Other images built for the tests (the pause
// image of a test node) share it, and so its reproducibility.
func SingleLayer(p v1.Platform, files map[string]File, config v1.Config) (v1.Image, error) {
	layerTar, err := tarLayer(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: Epoch}
	cfg.Config = config
	return mutate.ConfigFile(img, cfg)
}

// tarLayer writes files and their parent directories in sorted order, owned
// by root, with Epoch as every time.
func tarLayer(files map[string]File) ([]byte, error) {
	dirs := map[string]bool{}
	var names []string
	for name := range files {
		names = append(names, name)
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		names = append(names, d+"/")
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		hdr := &tar.Header{Name: name, ModTime: Epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(name, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		} else {
			f := files[name]
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, f.Mode, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(files[name].Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Entry is one entry of an image's layer: its header and, for a regular
// file, its contents.
type Entry struct {
	Header *tar.Header
	Data   []byte
}

// Entries reads the only layer of img, an image Image or SingleLayer made,
// entry by entry, in the layer's order.
func Entries(img v1.Image) ([]Entry, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var entries []Entry
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Header: hdr, Data: data})
	}
}

// RefNameAnnotation names an image in an OCI layout; `ctr images import`
// takes the image name from it.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as an OCI image layout at dir, replacing what was
// there, under the name ref.
func WriteLayout(dir, ref string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return l.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref}))
}
