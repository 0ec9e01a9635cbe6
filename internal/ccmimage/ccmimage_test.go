package ccmimage

import (
	"archive/tar"
	"errors"
	"io"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestIndex checks the index of every default platform from stand-in
// binaries: the end-to-end image test compiles and runs the host's image
// only, so this is where the other platforms' images are checked.
func TestIndex(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	binaries := make([][]byte, len(DefaultPlatforms))
	for i, p := range DefaultPlatforms {
		binaries[i] = []byte("manager for " + p.String())
	}
	idx, err := Index(DefaultPlatforms, binaries, ca)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != len(DefaultPlatforms) {
		t.Fatalf("%d manifests, want one per platform %v", len(manifest.Manifests), DefaultPlatforms)
	}
	for i, d := range manifest.Manifests {
		want := DefaultPlatforms[i]
		if d.Platform == nil || !d.Platform.Equals(want) {
			t.Fatalf("manifest %d is for %v, want %s", i, d.Platform, want)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != want.OS || cfg.Architecture != want.Architecture {
			t.Errorf("%s: config says %s/%s", want, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != User || !slices.Equal(cfg.Config.Entrypoint, []string{"/" + BinaryPath}) || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s: user %q entrypoint %q cmd %q", want, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		if !cfg.Created.Time.Equal(Epoch) {
			t.Errorf("%s: created %v, want %v", want, cfg.Created.Time, Epoch)
		}
		files := layerFiles(t, img)
		wantNames := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", CAPath, "usr/", "usr/local/", "usr/local/bin/", BinaryPath}
		var names []string
		for _, f := range files {
			names = append(names, f.name)
		}
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s: files %q, want exactly %q", want, names, wantNames)
		}
		for _, f := range files {
			switch f.name {
			case BinaryPath:
				if string(f.data) != string(binaries[i]) || f.mode != 0o755 {
					t.Errorf("%s: binary %q mode %o, want %q 0755", want, f.data, f.mode, binaries[i])
				}
			case CAPath:
				if string(f.data) != string(ca) || f.mode != 0o644 {
					t.Errorf("%s: CA roots %q mode %o", want, f.data, f.mode)
				}
			}
		}
	}

	again, err := Index(DefaultPlatforms, binaries, ca)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("same binaries, two digests: %s and %s", d1, d2)
	}

	if _, err := Index(DefaultPlatforms, binaries[:1], ca); err == nil {
		t.Error("one binary for two platforms: no error")
	}
}

type layerFile struct {
	name string
	mode int64
	data []byte
}

// layerFiles reads img's only layer, checking that every entry is owned by
// root and dated Epoch.
func layerFiles(t *testing.T, img v1.Image) []layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []layerFile
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(Epoch) {
			t.Errorf("%s: owner %d:%d, time %v; want root and %v", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, Epoch)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, layerFile{hdr.Name, hdr.Mode, data})
	}
}
