package ccmimage

import (
	"slices"
	"testing"
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
		entries, err := Entries(img)
		if err != nil {
			t.Fatal(err)
		}
		wantNames := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", CAPath, "usr/", "usr/local/", "usr/local/bin/", BinaryPath}
		var names []string
		for _, e := range entries {
			names = append(names, e.Header.Name)
			if e.Header.Uid != 0 || e.Header.Gid != 0 || !e.Header.ModTime.Equal(Epoch) {
				t.Errorf("%s: %s: owner %d:%d, time %v; want root and %v", want, e.Header.Name, e.Header.Uid, e.Header.Gid, e.Header.ModTime, Epoch)
			}
			switch e.Header.Name {
			case BinaryPath:
				if string(e.Data) != string(binaries[i]) || e.Header.Mode != 0o755 {
					t.Errorf("%s: binary %q mode %o, want %q 0755", want, e.Data, e.Header.Mode, binaries[i])
				}
			case CAPath:
				if string(e.Data) != string(ca) || e.Header.Mode != 0o644 {
					t.Errorf("%s: CA roots %q mode %o", want, e.Data, e.Header.Mode)
				}
			}
		}
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s: files %q, want exactly %q", want, names, wantNames)
		}
	}

	again, err := Index(DefaultPlatforms, binaries, ca)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := again.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("same binaries, two digests: %s and %s", d1, d2)
	}

	if _, err := Index(DefaultPlatforms, binaries[:1], ca); err == nil {
		t.Error("one binary for two platforms: no error")
	}
}
