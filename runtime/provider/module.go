package provider

import (
	"context"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// ReadModule reads the module cfg names and applies every check it asks
// for (sha256 pin, then signature, both over the file's bytes as stored),
// returning the decompressed wasm. The CCM and the wasmccm tool both load
// modules through it, so neither can skip a check the other makes.
func ReadModule(cfg cloudconfig.Module) ([]byte, error) {
	file, err := modulefile.Read(cfg.Path, trust(cfg))
	return file.Wasm, err
}

// trust is what the module file must satisfy.
func trust(m cloudconfig.Module) modulefile.Trust {
	return modulefile.Trust{SHA256: m.SHA256, PublicKeyPath: m.PublicKeyPath, SignaturePath: m.SignaturePath}
}

// instantiate compiles and initialises a module file with the grants of
// the cloud-config (lifecycle.Options.Load); shadow starts it as a
// candidate, which gets only the rate budget's spare room
// (egress.RateBudget).
func (c *Cloud) instantiate(ctx context.Context, file modulefile.File, shadow bool) (Backend, error) {
	cfg := c.auth.hostConfig(c.cfg, c.name)
	cfg.HTTP.Budget, cfg.HTTP.Shadow = c.rates, shadow
	return host.New(ctx, file.Wasm, cfg)
}
