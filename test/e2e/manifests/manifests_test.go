package manifests_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/test/e2e/manifests"
)

func TestKustomize(t *testing.T) {
	const resource = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n---\n# only a comment\n"
	tests := []struct {
		name          string
		kustomization string
		wantObjects   int
		wantErr       string
	}{
		{name: "resources", kustomization: "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml, a.yaml]\n", wantObjects: 2},
		{name: "a transformer", kustomization: "kind: Kustomization\nnamePrefix: p-\nresources: [a.yaml]\n", wantErr: "only resources are supported"},
		{name: "a missing resource", kustomization: "kind: Kustomization\nresources: [b.yaml]\n", wantErr: "b.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "kustomization.yaml"), tt.kustomization)
			write(t, filepath.Join(dir, "a.yaml"), resource)
			objs, err := manifests.Kustomize(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(objs) != tt.wantObjects {
				t.Fatalf("%d objects, error %v; want %d", len(objs), err, tt.wantObjects)
			}
		})
	}
}

// TestExamplesDeploy reads the shipped manifests and edits two of them as
// the node test does.
func TestExamplesDeploy(t *testing.T) {
	objs, err := manifests.Kustomize("../../../examples/deploy")
	if err != nil {
		t.Fatal(err)
	}
	dep := manifests.Find(objs, "Deployment", "wasm-cloud-controller-manager")
	if dep == nil {
		t.Fatal("no Deployment")
	}
	err = manifests.Edit(dep, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "E", Value: "v"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var env []corev1.EnvVar
	if err := manifests.Edit(dep, func(d *appsv1.Deployment) { env = d.Spec.Template.Spec.Containers[0].Env }); err != nil {
		t.Fatal(err)
	}
	if last := env[len(env)-1]; last.Name != "E" || last.Value != "v" {
		t.Errorf("edited env ends with %+v", last)
	}
	if err := manifests.Edit(dep, func(*corev1.ConfigMap) {}); err == nil {
		t.Error("editing a Deployment as a ConfigMap succeeded")
	}
	if manifests.Find(objs, "Deployment", "other") != nil {
		t.Error("found a Deployment that is not there")
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
