// Command image builds the wasm-cloud-controller-manager image for
// linux/amd64 and linux/arm64 without a Docker daemon and writes it as an
// OCI image layout (see internal/ccmimage). `make image` runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/wasmccm/wasmccm/internal/ccmimage"
)

func main() {
	out := flag.String("o", "bin/image", "OCI layout directory to write")
	ref := flag.String("ref", "wasmccm/wasm-cloud-controller-manager:dev", "image name recorded in the layout")
	ca := flag.String("ca", ccmimage.DefaultCAFile, "PEM bundle of CA roots to copy into the image")
	flag.Parse()
	idx, err := ccmimage.Build(ccmimage.Options{RepoRoot: ".", CAFile: *ca})
	if err == nil {
		err = ccmimage.WriteLayout(*out, *ref, idx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	d, err := idx.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s@%s\n", *out, *ref, d)
}
