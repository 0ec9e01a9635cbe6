// Package deploy_test checks the two ways of installing the manager, the
// kustomize manifests in examples/deploy and the Helm chart in
// charts/wasm-cloud-controller-manager, against one set of expectations:
// that every manifest is a valid object the API server accepts, that the
// pieces agree with each other (cloud-config paths and mounts, flags and
// RBAC), and that the RBAC is exactly what the cloud controllers need. The
// chart rendered with its defaults must also equal the kustomize manifests,
// so the two cannot drift apart. The tests that need no cluster always run
// (the chart's need the cached helm); the others start etcd and
// kube-apiserver through package cluster and skip without them.
package deploy_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/test/e2e/cluster"
	"github.com/wasmccm/wasmccm/test/e2e/manifests"
)

const (
	// manifestDir is examples/deploy, relative to this package.
	manifestDir = "../../../examples/deploy"
	// chartDir is the Helm chart, relative to this package.
	chartDir = "../../../charts/wasm-cloud-controller-manager"
	// moduleTemplate is the one manifest that is a template for render.sh.
	moduleTemplate = "module-configmap.yaml"
	// moduleKey is the module's key in the module ConfigMap.
	moduleKey   = "simcloud.wasm.gz"
	placeholder = "__SIMCLOUD_WASM_GZ_BASE64__"

	systemNamespace = "kube-system"
	saName          = "wasm-cloud-controller-manager"
	saUser          = "system:serviceaccount:" + systemNamespace + ":" + saName
	deploymentName  = "wasm-cloud-controller-manager"
	leaseName       = "cloud-controller-manager"

	// configMapMaxBytes is Kubernetes' limit on a ConfigMap's data.
	configMapMaxBytes = 1 << 20
)

// emptyModule is the smallest valid wasm module: the magic and the version.
var emptyModule = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// manifest is one object of one file of examples/deploy or one template
// of the chart (named like the kustomize file it mirrors).
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return m.file + ": " + m.obj.GetKind() + " " + m.obj.GetNamespace() + "/" + m.obj.GetName()
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// render runs render.sh on a module file holding module and returns its
// standard output; an error carries its standard error.
func render(t testing.TB, module []byte, extraArgs ...string) ([]byte, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "module")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{filepath.Join(manifestDir, "render.sh"), path}, extraArgs...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// decodeDocuments splits a YAML stream into objects, strictly: duplicate
// keys are errors. Documents holding only comments are skipped.
func decodeDocuments(t testing.TB, file string, data []byte) []manifest {
	t.Helper()
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	out := make([]manifest, len(objs))
	for i, obj := range objs {
		out[i] = manifest{file: file, obj: obj}
	}
	return out
}

// manifestFiles lists examples/deploy/*.yaml without kustomization.yaml.
func manifestFiles(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range paths {
		if name := filepath.Base(p); name != "kustomization.yaml" {
			files = append(files, name)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", manifestDir)
	}
	return files
}

// loadManifests reads every object of examples/deploy. The module
// ConfigMap template is rendered by render.sh with module.
func loadManifests(t testing.TB, module []byte) []manifest {
	t.Helper()
	var all []manifest
	for _, file := range manifestFiles(t) {
		var data []byte
		var err error
		if file == moduleTemplate {
			data, err = render(t, module)
		} else {
			data, err = os.ReadFile(filepath.Join(manifestDir, file))
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		all = append(all, decodeDocuments(t, file, data)...)
	}
	return all
}

// source is one way of producing the manifests.
type source struct {
	name string
	// load returns every object, with module in the module ConfigMap.
	load func(t testing.TB, module []byte) []manifest
}

// sources are the kustomize manifests and the chart with its defaults,
// which every test checks alike.
var sources = []source{
	{name: "kustomize", load: loadManifests},
	{name: "chart", load: func(t testing.TB, module []byte) []manifest { return renderChart(t, module) }},
}

// renderChart renders the chart as `helm template` into kube-system, with
// module as the module ConfigMap's content and set as further --set
// arguments. Each object is named after its template's file.
func renderChart(t testing.TB, module []byte, set ...string) []manifest {
	t.Helper()
	out, err := helmTemplate(t, module, set...)
	if err != nil {
		t.Fatal(err)
	}
	return splitChartOutput(t, out)
}

func helmTemplate(t testing.TB, module []byte, set ...string) ([]byte, error) {
	t.Helper()
	return helmTemplateValues(t, "", "module.configMap.base64", module, set...)
}

// helmTemplateValues renders the chart as helmTemplate does, with the
// values file values (none when empty) and the base64 of module set at the
// value moduleValue.
func helmTemplateValues(t testing.TB, values, moduleValue string, module []byte, set ...string) ([]byte, error) {
	t.Helper()
	b64 := filepath.Join(t.TempDir(), "module.b64")
	if err := os.WriteFile(b64, []byte(base64.StdEncoding.EncodeToString(module)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "wasm-cloud-controller-manager", chartDir, "--namespace", systemNamespace,
		"--kube-version", cluster.Version(), "--set-file", moduleValue + "=" + b64}
	if values != "" {
		args = append(args, "--values", values)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return cluster.Helm(t, args...)
}

// splitChartOutput splits helm's output at its "# Source:" comments.
func splitChartOutput(t testing.TB, out []byte) []manifest {
	t.Helper()
	var all []manifest
	for _, chunk := range strings.Split("\n"+string(out), "\n---\n") {
		if strings.TrimSpace(chunk) == "" {
			continue
		}
		rest, ok := strings.CutPrefix(chunk, "# Source: ")
		file, _, _ := strings.Cut(rest, "\n")
		if !ok {
			t.Fatalf("helm template output without a source comment: %.200q", chunk)
		}
		all = append(all, decodeDocuments(t, filepath.Base(file), []byte(chunk))...)
	}
	if len(all) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return all
}

// find returns the object of that kind and name, failing the test if there
// is not exactly one.
func find(t testing.TB, all []manifest, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, m := range all {
		if m.obj.GetKind() == kind && m.obj.GetName() == name {
			found = append(found, m.obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q, found %d", kind, name, len(found))
	}
	return found[0]
}

// typed converts u into the Go type registered for its kind, rejecting
// unknown fields.
func typed(t testing.TB, u *unstructured.Unstructured) runtime.Object {
	t.Helper()
	obj, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return obj
}

func as[T runtime.Object](t testing.TB, all []manifest, kind, name string) T {
	t.Helper()
	obj, ok := typed(t, find(t, all, kind, name)).(T)
	if !ok {
		t.Fatalf("%s %q has an unexpected Go type", kind, name)
	}
	return obj
}

// TestKustomization checks that kustomization.yaml lists every manifest but
// the module template, which needs render.sh.
func TestKustomization(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || k.APIVersion != "kustomize.config.k8s.io/v1beta1" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	want := slices.DeleteFunc(manifestFiles(t), func(f string) bool { return f == moduleTemplate })
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources = %v, want %v", got, want)
	}
}
