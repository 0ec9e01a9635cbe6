package deploy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/provider"
)

// helmLabels are the labels only the chart sets; they differ between
// releases and chart versions, so the comparison with examples/deploy
// ignores them.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// TestChartMatchesKustomize renders the chart with its defaults and
// compares it, object by object, with examples/deploy: the same objects
// with the same content, but for Helm's labels and the cloud-config's
// comments and key order. This keeps the two sources from drifting.
func TestChartMatchesKustomize(t *testing.T) {
	module := gzipBytes(t, emptyModule)
	chart := canonical(t, renderChart(t, module))
	kustomize := canonical(t, loadManifests(t, module))
	for key, want := range kustomize {
		got, ok := chart[key]
		if !ok {
			t.Errorf("%s is in examples/deploy, not in the chart", key)
			continue
		}
		if got != want {
			t.Errorf("%s differs:\n chart:     %s\n kustomize: %s", key, got, want)
		}
	}
	for key := range chart {
		if _, ok := kustomize[key]; !ok {
			t.Errorf("%s is in the chart, not in examples/deploy", key)
		}
	}
}

// canonical maps each object to its JSON, without Helm's labels and with
// the cloud-config parsed.
func canonical(t *testing.T, all []manifest) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range all {
		obj := m.obj.DeepCopy()
		dropHelmLabels(obj.Object, "metadata", "labels")
		dropHelmLabels(obj.Object, "spec", "template", "metadata", "labels")
		if obj.GetKind() == "ConfigMap" && obj.GetName() == "wasm-cloud-config" {
			text, _, _ := unstructured.NestedString(obj.Object, "data", "cloud-config.yaml")
			js, err := yaml.YAMLToJSONStrict([]byte(text))
			if err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			var parsed any
			if err := json.Unmarshal(js, &parsed); err != nil {
				t.Fatal(err)
			}
			obj.Object["data"] = map[string]any{"cloud-config.yaml": parsed}
		}
		js, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		out[m.file+": "+obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName()] = string(js)
	}
	return out
}

func dropHelmLabels(obj map[string]any, path ...string) {
	labels, ok, _ := unstructured.NestedStringMap(obj, path...)
	if !ok {
		return
	}
	for _, l := range helmLabels {
		delete(labels, l)
	}
	_ = unstructured.SetNestedStringMap(obj, labels, path...)
}

// TestHelmLint runs helm lint on the chart, strictly (warnings fail).
func TestHelmLint(t *testing.T) {
	out, err := helm(t, "lint", "--strict", chartDir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// moduleSources are the chart's module sources other than the default
// ConfigMap, as --set arguments.
var moduleSources = []struct {
	name string
	set  []string
}{
	{"image volume", []string{"module.source=image", "module.image.reference=registry.example/simcloud-module@" + testDigest}},
	{"registry pull", []string{"module.source=registry", "module.registry.reference=registry.example/simcloud-module@" + testDigest,
		"module.registry.pullSecret=module-registry"}},
}

// TestChartModuleSources checks what each module source renders: where
// the module comes from, and which settings the chart refuses.
func TestChartModuleSources(t *testing.T) {
	module := gzipBytes(t, emptyModule)
	tests := []struct {
		name    string
		set     []string
		check   func(t *testing.T, pod *corev1.PodSpec, moduleConfig map[string]any)
		wantErr string
	}{
		{name: "image volume", set: moduleSources[0].set, check: func(t *testing.T, pod *corev1.PodSpec, moduleConfig map[string]any) {
			v := volume(t, pod, "module")
			if v.Image == nil || v.Image.Reference != "registry.example/simcloud-module@"+testDigest {
				t.Errorf("module volume %+v, want the image volume", v.VolumeSource)
			}
			if moduleConfig["path"] != "/etc/wasmccm/module/simcloud.wasm.gz" || moduleConfig["image"] != nil {
				t.Errorf("cloud-config module %v, want the file in the image volume", moduleConfig)
			}
		}},
		{name: "registry pull", set: moduleSources[1].set, check: func(t *testing.T, pod *corev1.PodSpec, moduleConfig map[string]any) {
			if v := volume(t, pod, "registry-auth"); v.Secret == nil || v.Secret.SecretName != "module-registry" ||
				len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != corev1.DockerConfigJsonKey || v.Secret.Items[0].Path != "config.json" {
				t.Errorf("registry-auth volume %+v, want the pull secret as config.json", v.VolumeSource)
			}
			if v := volume(t, pod, "module-cache"); v.EmptyDir == nil {
				t.Errorf("module-cache volume %+v, want an emptyDir", v.VolumeSource)
			}
			want := map[string]any{"image": "registry.example/simcloud-module@" + testDigest,
				"registryConfig": "/etc/wasmccm/registry/config.json", "imageCacheDir": "/var/lib/wasmccm/modules"}
			for k, v := range want {
				if moduleConfig[k] != v {
					t.Errorf("cloud-config module.%s = %v, want %v", k, moduleConfig[k], v)
				}
			}
			if moduleConfig["path"] != nil {
				t.Errorf("cloud-config module.path = %v, want none", moduleConfig["path"])
			}
		}},
		{name: "registry tag allowed", set: []string{"module.source=registry", "module.registry.reference=registry.example/m:v1", "module.registry.allowTags=true"},
			check: func(t *testing.T, pod *corev1.PodSpec, moduleConfig map[string]any) {
				if moduleConfig["allowTags"] != true || moduleConfig["registryConfig"] != nil {
					t.Errorf("cloud-config module %v, want allowTags and no registryConfig", moduleConfig)
				}
			}},
		{name: "registry tag refused", set: []string{"module.source=registry", "module.registry.reference=registry.example/m:v1"},
			wantErr: `has no @sha256: digest`},
		{name: "registry without reference", set: []string{"module.source=registry"}, wantErr: "needs module.registry.reference"},
		{name: "image without reference", set: []string{"module.source=image"}, wantErr: "needs module.image.reference"},
		{name: "unknown source", set: []string{"module.source=http"}, wantErr: `module.source is "http"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helmTemplate(t, module, tt.set...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("helm template error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			all := splitChartOutput(t, out)
			dep := as[*appsv1.Deployment](t, all, "Deployment", deploymentName)
			cm := as[*corev1.ConfigMap](t, all, "ConfigMap", "wasm-cloud-config")
			var cfg struct {
				Module map[string]any `json:"module"`
			}
			if err := yaml.Unmarshal([]byte(cm.Data["cloud-config.yaml"]), &cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := provider.ParseConfig(strings.NewReader(cm.Data["cloud-config.yaml"])); err != nil {
				t.Errorf("the CCM refuses the rendered cloud-config: %v", err)
			}
			tt.check(t, &dep.Spec.Template.Spec, cfg.Module)
			// Only the default source ships the module in a ConfigMap.
			for _, m := range all {
				if m.obj.GetName() == "wasm-provider-module" {
					t.Errorf("the chart renders %s for module source %q", m, tt.name)
				}
			}
		})
	}
}

func volume(t *testing.T, pod *corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// testChartModuleSources sends the chart rendered for each module source
// through the API server's server-side dry run; the image volume needs
// Kubernetes 1.35 or later.
func testChartModuleSources(ctx context.Context, t *testing.T, adminCfg *rest.Config) {
	module := gzipBytes(t, emptyModule)
	for _, ms := range moduleSources {
		t.Run(ms.name, func(t *testing.T) {
			out, err := helmTemplate(t, module, ms.set...)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range splitChartOutput(t, out) {
				if err := create(ctx, t, adminCfg, m.obj, true); err != nil {
					t.Errorf("%s: %v", m, err)
				}
			}
		})
	}
}
