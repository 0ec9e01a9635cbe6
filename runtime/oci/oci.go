// Package oci stores provider modules in OCI registries as Wasm artifacts,
// in the layout of the CNCF TAG Runtime Wasm OCI artifact specification: an
// OCI image manifest whose config has media type
// application/vnd.wasm.config.v0+json and whose one layer, of media type
// application/wasm, is the module itself. Istio, Spin, wasmCloud and
// Kubewarden distribute Wasm the same way, and any OCI registry stores it.
//
// A pull names the artifact by digest: the digest in the reference is the
// trust anchor (the manifest is checked against it, and the layer against
// the manifest), so a registry can serve a module but not change it. Tags
// move, so they are refused unless the caller allows them explicitly.
package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmccm/wasmccm/runtime/oci/imageref"
	"github.com/wasmccm/wasmccm/runtime/wasmfile"
)

// Media types of the Wasm OCI artifact layout.
const (
	ConfigMediaType types.MediaType = "application/vnd.wasm.config.v0+json"
	LayerMediaType  types.MediaType = "application/wasm"
)

// maxManifestBytes bounds the manifest a registry may send; a Wasm
// artifact's is a few hundred bytes.
const maxManifestBytes = 1 << 20

// Options are the settings shared by Push and Pull.
type Options struct {
	// Keychain supplies registry credentials; nil means anonymous.
	Keychain authn.Keychain
	// AllowTags accepts a pull reference without a digest.
	AllowTags bool
	// Transport carries the requests; nil means remote.DefaultTransport.
	// Registries on loopback or private addresses are spoken to over plain
	// HTTP, others over HTTPS.
	Transport http.RoundTripper
}

func (o Options) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain() // resolves to anonymous
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// wasmConfig is the artifact's config blob.
type wasmConfig struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	LayerDigests []string  `json:"layerDigests"`
}

// Artifact returns the Wasm artifact of module (plain or gzip-compressed;
// the layer is always the plain module). The config's creation time is
// fixed, so the same module always makes the same digest.
func Artifact(module []byte) (v1.Image, error) {
	wasm, err := wasmfile.Decompress(module)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		return nil, errors.New("not a wasm module (no \\0asm magic)")
	}
	layer := static.NewLayer(wasm, LayerMediaType)
	layerDigest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(wasmConfig{
		Created:      time.Unix(0, 0).UTC(),
		Architecture: "wasm",
		OS:           "wasip1",
		LayerDigests: []string{layerDigest.String()},
	})
	if err != nil {
		return nil, err
	}
	configDigest, _, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(config)), Digest: configDigest},
		Layers:        []v1.Descriptor{{MediaType: LayerMediaType, Size: int64(len(wasm)), Digest: layerDigest}},
	})
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: manifest, config: config, layer: layer})
}

// artifact is the Wasm artifact as go-containerregistry's image core:
// its config is the Wasm config, which is no container image config.
type artifact struct {
	manifest, config []byte
	layer            v1.Layer
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("artifact has no layer %s", h)
}

// Push uploads module as a Wasm artifact to ref (a tag or a repository,
// which means tag "latest") and returns the artifact's reference by digest,
// the one to configure.
func Push(ctx context.Context, module []byte, ref string, opts Options) (name.Digest, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reference %q: %w", ref, err)
	}
	img, err := Artifact(module)
	if err != nil {
		return name.Digest{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(tag, img, opts.remote(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing to %s: %w", tag.RegistryStr(), err)
	}
	return tag.Context().Digest(digest.String()), nil
}

// Module is a pulled module.
type Module struct {
	// Digest is the artifact's manifest digest ("sha256:..."), the one a
	// reference by digest names.
	Digest string
	// LayerDigest is the digest of the module file, the value a module.sha256
	// pin in the cloud-config compares with.
	LayerDigest string
	// Wasm is the module, uncompressed.
	Wasm []byte
}

// Pull fetches the module ref names and checks it: the manifest against the
// reference's digest, the media types of the Wasm layout, and the module
// against the manifest's layer digest.
func Pull(ctx context.Context, ref string, opts Options) (*Module, error) {
	r, err := imageref.Parse(ref, opts.AllowTags)
	if err != nil {
		return nil, err
	}
	m, _, err := pull(ctx, r, opts, nil)
	return m, err
}

// pull is Pull of a parsed reference; it also returns the manifest. When
// cached has the module of the manifest's digest, the module is not
// fetched again.
func pull(ctx context.Context, r name.Reference, opts Options, cached func(digest string) (*Module, bool)) (*Module, []byte, error) {
	desc, err := remote.Get(r, opts.remote(ctx)...)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s from %s: %w", r, r.Context().RegistryStr(), err)
	}
	if len(desc.Manifest) > maxManifestBytes {
		return nil, nil, fmt.Errorf("%s: manifest of %d bytes exceeds %d", r, len(desc.Manifest), maxManifestBytes)
	}
	digest := sha256Digest(desc.Manifest)
	if d, ok := r.(name.Digest); ok && d.DigestStr() != digest {
		return nil, nil, fmt.Errorf("%s: registry sent a manifest with digest %s", r, digest)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		return nil, nil, fmt.Errorf("%s is a %s, not a Wasm artifact (an OCI image manifest)", r, desc.MediaType)
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return nil, nil, fmt.Errorf("%s: manifest: %w", r, err)
	}
	if m.Config.MediaType != ConfigMediaType {
		return nil, nil, fmt.Errorf("%s: config media type %q, want %q", r, m.Config.MediaType, ConfigMediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		return nil, nil, fmt.Errorf("%s: want one layer of media type %s, found %d layers", r, LayerMediaType, len(m.Layers))
	}
	if cached != nil {
		if m, ok := cached(digest); ok {
			return m, desc.Manifest, nil
		}
	}
	layer := m.Layers[0]
	if layer.Size > wasmfile.MaxModuleBytes {
		return nil, nil, fmt.Errorf("%s: module of %d bytes exceeds %d", r, layer.Size, wasmfile.MaxModuleBytes)
	}
	blob, err := remote.Layer(r.Context().Digest(layer.Digest.String()), opts.remote(ctx)...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: layer: %w", r, err)
	}
	rc, err := blob.Compressed()
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s layer %s: %w", r, layer.Digest, err)
	}
	defer rc.Close()
	wasm, err := io.ReadAll(io.LimitReader(rc, layer.Size+1))
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s layer %s: %w", r, layer.Digest, err)
	}
	if got := sha256Digest(wasm); got != layer.Digest.String() || int64(len(wasm)) != layer.Size {
		return nil, nil, fmt.Errorf("%s: registry sent a module with digest %s (%d bytes); the manifest names %s (%d bytes)",
			r, got, len(wasm), layer.Digest, layer.Size)
	}
	return &Module{Digest: digest, LayerDigest: layer.Digest.String(), Wasm: wasm}, desc.Manifest, nil
}

// ByDigest reports whether ref is a valid reference naming a digest.
func ByDigest(ref string) bool {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return false
	}
	_, ok := r.(name.Digest)
	return ok
}

func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
