package wasmccmcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/oci"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// registryFlags are the flags push and pull share.
func registryFlags(fs *flag.FlagSet) func() oci.Options {
	dockerConfig := fs.String("docker-config", "", "docker config file with the registry's credentials (default: docker's own lookup: $DOCKER_CONFIG, ~/.docker/config.json, credential helpers)")
	return func() oci.Options {
		if *dockerConfig == "" {
			return oci.Options{Keychain: authn.DefaultKeychain}
		}
		return oci.Options{Keychain: oci.DockerConfigKeychain(*dockerConfig)}
	}
}

// push uploads a module as a Wasm OCI artifact and prints its reference by
// digest, the value for module.image in the cloud-config.
func push(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stdout)
	options := registryFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("push: want MODULE and REF")
	}
	// Through the CCM's own loader, so that what is pushed is a module the
	// CCM can read.
	wasm, err := provider.ReadModule(cloudconfig.Module{Path: fs.Arg(0)})
	if err != nil {
		return err
	}
	ref, err := oci.Push(context.Background(), wasm, fs.Arg(1), options())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ref)
	return nil
}

// pull fetches a module, checked against the reference's digest, into a
// file.
func pull(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(stdout)
	options := registryFlags(fs)
	out := fs.String("o", "module.wasm", "file to write the module to")
	allowTags := fs.Bool("allow-tags", false, "accept a reference without a digest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("pull: want REF")
	}
	opts := options()
	opts.AllowTags = *allowTags
	m, err := oci.Pull(context.Background(), fs.Arg(0), opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, m.Wasm, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d bytes, artifact %s, module %s\n", *out, len(m.Wasm), m.Digest, m.LayerDigest)
	return nil
}
