package wasmccmcli

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// sdkVersion is the release a new provider requires of the two modules it
// builds on, released together: the ABI (github.com/wasmccm/wasmccm/abi,
// tagged abi/vX.Y.Z) and the SDK (github.com/wasmccm/wasmccm/modules/sdk,
// tagged modules/sdk/vX.Y.Z).
const sdkVersion = "v0.1.0"

//go:embed scaffold
var scaffold embed.FS

// scaffoldData fills the templates under scaffold/.
type scaffoldData struct {
	Name       string // provider name, as in provider IDs: mycloud
	Package    string // Go package name: mycloud
	Module     string // Go module path
	SDKVersion string
}

var providerName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)

// initCommand scaffolds a provider module in a new directory: go.mod on the
// ABI and SDK modules alone, a provider whose InstancesV2 and LoadBalancer methods
// answer NotImplemented, a native unit test, a Makefile building with
// TinyGo or Go, an example cloud-config and a test spec for wasmccm test.
func initCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stdout)
	module := fs.String("module", "", "Go module path of the provider (default NAME)")
	dir := fs.String("dir", "", "directory to create (default NAME)")
	version := fs.String("sdk-version", sdkVersion, "version of the ABI and SDK modules (github.com/wasmccm/wasmccm/abi, .../modules/sdk) to require")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("init: want exactly one NAME, the provider's name as in its provider IDs (NAME://...): wasmccm init mycloud")
	}
	name := fs.Arg(0)
	if !providerName.MatchString(name) {
		return fmt.Errorf("init: name %q must be lower-case letters, digits and dashes, starting with a letter", name)
	}
	data := scaffoldData{Name: name, Package: strings.ReplaceAll(name, "-", ""), Module: *module, SDKVersion: *version}
	if data.Module == "" {
		data.Module = name
	}
	if *dir == "" {
		*dir = name
	}
	if err := checkInitDir(*dir); err != nil {
		return err
	}
	files, err := renderScaffold(data)
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(*dir, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.content, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, `created %s: the %s provider (module %s)
next:
  cd %s
  go mod tidy && go test ./...
  make module            # %s.wasm with TinyGo (make module-go: standard Go)
  wasmccm validate %s.wasm
  wasmccm test -config cloud-config.yaml -spec test-spec.yaml %s.wasm
`, *dir, name, data.Module, *dir, name, name, name)
	return nil
}

// checkInitDir refuses a directory init would write over, saying what to
// do instead: dir must be absent or an empty directory.
func checkInitDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("init: %w", err)
	case !info.IsDir():
		return fmt.Errorf("init: %s is a file, and init creates a directory there: remove or rename the file, or pick another directory with -dir", dir)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("init: %w", err)
	} else if len(entries) > 0 {
		return fmt.Errorf("init: %s exists and is not empty, and init writes only into a new or empty directory: pick another with -dir, or remove it", dir)
	}
	return nil
}

type scaffoldFile struct {
	path    string
	content []byte
}

// renderScaffold executes every template under scaffold/ with data, in a
// fixed order; a file's path is its template's without ".tmpl".
func renderScaffold(data scaffoldData) ([]scaffoldFile, error) {
	var files []scaffoldFile
	err := fs.WalkDir(scaffold, "scaffold", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		tmpl, err := template.ParseFS(scaffold, path)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(path, "scaffold/"), ".tmpl")
		files = append(files, scaffoldFile{path: rel, content: out.Bytes()})
		return nil
	})
	return files, err
}
