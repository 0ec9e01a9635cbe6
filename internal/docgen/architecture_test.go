package docgen

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the root module's import path.
const modulePath = "github.com/wasmccm/wasmccm"

// mayImport is ARCHITECTURE.md's "imports flow one way", for the folders
// on that path: the project's folders whose packages each may import in
// code that is not a test. examples/ (fake clouds and the demo), test/ and
// hack/ stand beside it.
var mayImport = map[string][]string{
	"abi":      nil,
	"modules":  {"abi"},
	"runtime":  {"abi"},
	"internal": {"abi", "runtime", "modules", "examples"},
	"cmd":      {"internal", "examples"},
}

// goPackages maps each directory under the repository's top folders that
// holds Go code other than tests (testdata aside) to those files.
func goPackages(t *testing.T, tops ...string) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(repoRoot, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
				if err != nil {
					return err
				}
				pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// TestImportsFlowOneWay: no package imports one of the project's packages
// that ARCHITECTURE.md puts upstream of it (a test helper in runtime/ that
// built modules with internal/wasmbuild did).
func TestImportsFlowOneWay(t *testing.T) {
	tops := make([]string, 0, len(mayImport))
	for top := range mayImport {
		tops = append(tops, top)
	}
	fset := token.NewFileSet()
	for dir, files := range goPackages(t, tops...) {
		from := strings.SplitN(dir, "/", 2)[0]
		for _, file := range files {
			f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range f.Imports {
				path, _ := strconv.Unquote(spec.Path.Value)
				rest, ok := strings.CutPrefix(path, modulePath+"/")
				if !ok {
					continue
				}
				to := strings.SplitN(rest, "/", 2)[0]
				if to != from && !slices.Contains(mayImport[from], to) {
					t.Errorf("%s imports %s: %s/ may import only %v of the project's folders", file, path, from, mayImport[from])
				}
			}
		}
	}
}

// TestArchitectureNamesEveryRuntimePackage: ARCHITECTURE.md, the map a
// newcomer reads first, names every package of runtime/ but the test
// helpers (named *test, as net/http/httptest is).
func TestArchitectureNamesEveryRuntimePackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	for dir := range goPackages(t, "runtime") {
		if strings.HasSuffix(dir, "test") {
			continue
		}
		if !strings.Contains(string(doc), "`"+dir+"`") {
			t.Errorf("ARCHITECTURE.md does not name package %s", dir)
		}
	}
}

// TestOneAssembly: only runtime/assembly asks whether the cloud-config is
// one module's or several (cloudconfig.File.Sole) or reaches a module's
// provider.Cloud through the CCM's cloudprovider.Interface; everything
// else is given one shape for both.
func TestOneAssembly(t *testing.T) {
	asks := []string{".Sole()", ".(*provider.Cloud)", "case *provider.Cloud"}
	for dir, files := range goPackages(t, "runtime", "internal", "cmd") {
		if dir == "runtime/assembly" || dir == "runtime/cloudconfig" {
			continue
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, ask := range asks {
				if strings.Contains(string(data), ask) {
					t.Errorf("%s: %q: only runtime/assembly tells one module from several", file, ask)
				}
			}
		}
	}
}
