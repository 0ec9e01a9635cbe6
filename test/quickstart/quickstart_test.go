// Package quickstart runs the quick start of modules/README.md as written,
// in an empty directory outside the repository, with the wasmccm tool built
// from this tree and the SDK module of this tree.
package quickstart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// readerEnv is this process's environment without what a reader of the
// README would not have set: the project's own TinyGo and cache settings.
func readerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "TINYGO", "TINYGO_TARGET", "TINYGOROOT", "WASMCCM_CACHE", "WASMCCM_TINYGO", "XDG_CACHE_HOME", "GOCACHE", "GOPATH", "GOMODCACHE":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// quickstart returns the shell commands between the quickstart markers of
// the README.
func quickstart(t *testing.T, readme string) string {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- quickstart:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- quickstart:end -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no quickstart markers", readme)
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	block = strings.TrimSuffix(block, "```")
	return block
}

func TestQuickStart(t *testing.T) {
	if os.Getenv("WASMCCM_E2E") == "" {
		t.Skip("set WASMCCM_E2E=1: builds modules with TinyGo and Go (a minute)")
	}
	tinygo, err := wasmbuild.TinyGoPath()
	if err != nil {
		if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script := quickstart(t, filepath.Join(root, "modules", "README.md"))

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "./cmd/wasmccm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wasmccm: %v\n%s", err, out)
	}
	work := t.TempDir() // outside the repository, empty
	// A fresh HOME holding only what make deps installed, the cache of
	// hack/install-*.sh: TinyGo is found where modules/README.md says,
	// ~/.cache/wasmccm/bin/tinygo, with nothing set to point at it.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wasmbuild.CacheDir(), filepath.Join(home, ".cache", "wasmccm")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "wasmccm", "bin", "tinygo")); err != nil {
		t.Fatalf("make deps did not install ~/.cache/wasmccm/bin/tinygo (%s): rerun hack/install-tinygo.sh", tinygo)
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-xc", script)
	cmd.Dir = work
	cmd.Env = append(readerEnv(),
		"HOME="+home,
		// What a reader who ran go install has: wasmccm on PATH.
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The README's block says to set it when working from a checkout.
		"WASMCCM_SRC="+root,
		// Go's build cache changes only how long the builds take.
		"GOCACHE="+strings.TrimSpace(string(gocache)),
		// Nothing may come from the network: the ABI and the SDK are all it needs.
		"GOPROXY=off", "GOWORK=off",
		// None of the project's flags but -trimpath, which make test builds
		// everything with: it changes only the paths recorded in the
		// binaries, and it lets the quick start use the standard library
		// already compiled for the host and for wasip1 rather than compile
		// both again.
		"GOFLAGS=-trimpath",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quick start failed: %v\n%s", err, out)
	}
	dir := filepath.Join(work, "mycloud")

	for _, name := range []string{"mycloud.wasm", "mycloud-go.wasm", "mycloud.wasm.gz", "report.xml"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("the quick start did not make %s: %v", name, err)
		}
	}
	if !bytes.Contains(out, []byte("capabilities: InstancesV2, LoadBalancer\noptional:     SetLoadBalancerNodes; could add ListLoadBalancers (for LoadBalancer)\ncredentials:  does not import credential: it cannot read a secret\nvalid")) {
		t.Errorf("validate did not pass both builds:\n%s", out)
	}
	report, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	if !bytes.Contains(report, []byte("InstanceExists answered NotImplemented")) {
		t.Errorf("wasmccm test did not name the stubs:\n%s", report)
	}

	// A provider depends on the standard library and the ABI and SDK modules alone.
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}", "./...")
	list.Dir = dir
	list.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOPROXY=off", "GOWORK=off")
	deps, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(deps)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		switch mod {
		case "mycloud", "github.com/wasmccm/wasmccm/abi", "github.com/wasmccm/wasmccm/modules/sdk":
		default:
			t.Errorf("the provider depends on %s of module %q", pkg, mod)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, mod := range []string{"github.com/wasmccm/wasmccm/abi v", "github.com/wasmccm/wasmccm/modules/sdk v"} {
		if !bytes.Contains(gomod, []byte(mod)) {
			t.Errorf("go.mod does not require %s:\n%s", strings.TrimSuffix(mod, " v"), gomod)
		}
	}
	if sum, err := os.ReadFile(filepath.Join(dir, "go.sum")); err == nil && len(bytes.TrimSpace(sum)) > 0 {
		t.Errorf("go.sum is not empty:\n%s", sum)
	}
}
