// Package deploy_test checks the example deployment in examples/deploy: that
// every manifest is a valid object the API server accepts, that the pieces
// agree with each other (cloud-config paths and mounts, flags and RBAC), and
// that the RBAC is exactly what the cloud controllers need. The tests that
// need no cluster always run; the others start etcd and kube-apiserver
// through package cluster and skip without them.
package deploy_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	// manifestDir is examples/deploy, relative to this package.
	manifestDir = "../../../examples/deploy"
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

// manifest is one object of one file of examples/deploy.
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
	var out []manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, manifest{file: file, obj: obj})
	}
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
		t.Fatalf("want one %s %q in %s, found %d", kind, name, manifestDir, len(found))
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
