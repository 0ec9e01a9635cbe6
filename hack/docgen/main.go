// Command docgen writes docs/reference from the code (internal/docgen);
// run it from the module's root, as make docs does.
package main

import (
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/internal/docgen"
)

func main() {
	pages, err := docgen.Pages()
	if err != nil {
		klog.Fatal(err)
	}
	if err := os.MkdirAll(docgen.Dir, 0o755); err != nil {
		klog.Fatal(err)
	}
	for _, p := range pages {
		if err := os.WriteFile(filepath.Join(docgen.Dir, p.Name), p.Content, 0o644); err != nil {
			klog.Fatal(err)
		}
	}
}
