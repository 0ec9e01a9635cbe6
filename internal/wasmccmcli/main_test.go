package wasmccmcli

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/conformance/conformancetest"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func testprovider(t *testing.T) string {
	t.Helper()
	path, err := wasmbuild.Build("../../runtime/host/testdata/guests/testprovider", wasmbuild.Go)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestValidate(t *testing.T) {
	method := [2][]byte{{wt.I32, wt.I32}, {wt.I64}}
	version2 := wt.Module{MemoryPages: 1, Funcs: []wt.Func{
		{Export: abi.ExportABIVersion, Results: []byte{wt.I32}, Body: wt.I32Const(2)},
		{Export: abi.ExportAlloc, Params: []byte{wt.I32}, Results: []byte{wt.I32}, Body: wt.I32Const(1024)},
		{Export: abi.ExportInit, Params: method[0], Results: method[1], Body: wt.I64Const(0)},
	}}
	noAlloc := version2
	noAlloc.Funcs = []wt.Func{version2.Funcs[0], version2.Funcs[2]}
	noAlloc.Funcs[0].Body = wt.I32Const(abi.Version)
	dir := t.TempDir()
	write := func(name string, m wt.Module) string {
		path := filepath.Join(dir, name)
		wasm := m.Bytes()
		if strings.HasSuffix(name, ".gz") {
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			zw.Write(wasm)
			zw.Close()
			wasm = gz.Bytes()
		}
		os.WriteFile(path, wasm, 0o644)
		return path
	}
	// 600,000 empty functions: under a MB gzipped, as a ConfigMap holds it.
	manyFuncs := wt.Module{MemoryPages: 1, Funcs: append(slices.Clone(version2.Funcs), make([]wt.Func, 600_000)...)}

	cases := []struct {
		name     string
		path     string
		wantCode int
		want     string
	}{
		{"sdk module", testprovider(t), 0, "capabilities: InstancesV2, Instances, LoadBalancer, Routes, Zones, Clusters\noptional:     SetLoadBalancerNodes; could add ListLoadBalancers (for LoadBalancer)\ncredentials:  does not import credential: it cannot read a secret\nvalid"},
		{"wrong ABI version", write("v2.wasm", version2), 1, "module implements ABI version 2; this host implements version 1"},
		{"missing export", write("noalloc.wasm", noAlloc), 1, "missing export wasmccm_alloc"},
		{"600,000 functions", write("many.wasm.gz", manyFuncs), 1, "module defines 600003 functions, more than the 50000 the host compiles"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "validate", tc.path)
			if code != tc.wantCode || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d and %q", code, out, errOut, tc.wantCode, tc.want)
			}
		})
	}
	if code, _, errOut := runCLI(t, "", "validate", filepath.Join(dir, "absent.wasm")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("absent module: exit %d, %s", code, errOut)
	}
}

func TestCall(t *testing.T) {
	path := testprovider(t)
	code, out, errOut := runCLI(t, `{"Name": "n1", "Labels": {"shutdown": "true"}}`, "call", path, "InstanceShutdown")
	if code != 0 || strings.TrimSpace(out) != "true" {
		t.Fatalf("InstanceShutdown: exit %d, %q, %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, `"host-1"`, "call", path, abi.ExportCurrentNodeName)
	if code != 0 || strings.TrimSpace(out) != `"host-1"` {
		t.Fatalf("by export name: exit %d, %q", code, out)
	}
	code, _, errOut = runCLI(t, `{"Name": "error"}`, "call", path, "InstanceExists")
	if code != 1 || !strings.Contains(errOut, "cloud said no") {
		t.Fatalf("error status: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI(t, `{"Nmae": "typo"}`, "call", path, "InstanceExists")
	if code != 1 || !strings.Contains(errOut, `unknown field "Nmae"`) {
		t.Fatalf("bad input: exit %d, %s", code, errOut)
	}
	if code, _, errOut = runCLI(t, "", "call", path, "Teleport"); code != 1 || !strings.Contains(errOut, `unknown method "Teleport"`) {
		t.Fatalf("unknown method: exit %d, %s", code, errOut)
	}
}

// TestCallAppliesModuleChecks: call loads the module through the same
// checks as the CCM, so a pin in the cloud-config is enforced.
func TestCallAppliesModuleChecks(t *testing.T) {
	config := filepath.Join(t.TempDir(), "cloud-config.yaml")
	os.WriteFile(config, []byte("module: {path: ignored, sha256: \""+strings.Repeat("0", 64)+"\"}\n"), 0o644)
	code, _, errOut := runCLI(t, `{"Name": "n1"}`, "call", "-config", config, testprovider(t), "InstanceExists")
	if code != 1 || !strings.Contains(errOut, "sha256 mismatch") {
		t.Fatalf("exit %d, %s; want the pin refused", code, errOut)
	}
}

// TestHelp: -h prints help and exits 0 on every subcommand; none takes it
// for a file name.
func TestHelp(t *testing.T) {
	for _, sub := range []string{"init", "validate", "call", "test", "methods", "push", "pull"} {
		for _, flag := range []string{"-h", "--help"} {
			code, out, errOut := runCLI(t, "", sub, flag)
			if code != 0 || !strings.Contains(out+errOut, "usage") && !strings.Contains(out+errOut, "Usage") {
				t.Errorf("wasmccm %s %s: exit %d\n%s%s", sub, flag, code, out, errOut)
			}
			if strings.Contains(out+errOut, "no such file") {
				t.Errorf("wasmccm %s %s opened a file: %s%s", sub, flag, out, errOut)
			}
		}
	}
}

// TestCallMany: call makes one call per input line, on one module whose
// shared state lasts the whole run, and says what each call cost. The
// simcloud module keeps its instance snapshot in shared state, so only
// the first lookup lists the instances.
func TestCallMany(t *testing.T) {
	config, _ := conformancetest.Simcloud(t, "", "")
	simcloudModule := conformancetest.Module(t, "../../modules/simcloud/module", wasmbuild.Go)
	node1 := `{"Name":"node-1","ProviderID":"simcloud://i-0001"}`
	node2 := `{"Name":"node-2","ProviderID":"simcloud://i-0002"}`
	cases := []struct {
		name      string
		stdin     string
		flags     []string
		wantCode  int
		wantLines []string // ProviderIDs of the answers on stdout, one a line
		wantErr   []string // in stderr
	}{
		{
			name:      "three inputs share the snapshot",
			stdin:     node1 + "\n\n" + node1 + "\n" + node2 + "\n",
			wantLines: []string{`"simcloud://i-0001"`, `"simcloud://i-0001"`, `"simcloud://i-0002"`},
			wantErr:   []string{"call 1 (input line 1): 1 request, ", "call 2 (input line 3): 0 requests, ", "call 3 (input line 4): 0 requests, "},
		},
		{
			name:      "repeat",
			stdin:     node1,
			flags:     []string{"-repeat", "3"},
			wantLines: []string{`"simcloud://i-0001"`, `"simcloud://i-0001"`, `"simcloud://i-0001"`},
			wantErr:   []string{"call 1 (input line 1): 1 request, ", "call 2 (input line 1): 0 requests, ", "call 3 (input line 1): 0 requests, "},
		},
		{
			name:     "malformed second line",
			stdin:    node1 + "\n" + `{"Name": "node-2",` + "\n",
			wantCode: 1,
			wantErr:  []string{"wasmccm: input line 2: unexpected EOF"},
		},
		{
			name:     "unknown field in second line",
			stdin:    node1 + "\n" + `{"Nmae": "node-2"}` + "\n",
			wantCode: 1,
			wantErr:  []string{`wasmccm: input line 2: json: unknown field "Nmae"`},
		},
		{
			name:     "repeat zero",
			stdin:    node1,
			flags:    []string{"-repeat", "0"},
			wantCode: 1,
			wantErr:  []string{"-repeat 0: want 1 or more"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"call", "-config", config}, tc.flags...), simcloudModule, "InstanceMetadata")
			code, out, errOut := runCLI(t, tc.stdin, args...)
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if l != "" {
					lines = append(lines, l)
				}
			}
			if code != tc.wantCode || len(lines) != len(tc.wantLines) {
				t.Fatalf("exit %d, %d answers, want exit %d and %d answers\nstdout:\n%s\nstderr:\n%s", code, len(lines), tc.wantCode, len(tc.wantLines), out, errOut)
			}
			for i, want := range tc.wantLines {
				if !strings.Contains(lines[i], `{"ProviderID":`+want) {
					t.Errorf("answer %d: %s, want ProviderID %s", i+1, lines[i], want)
				}
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
		})
	}
}
