package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/membudget"
	"github.com/wasmccm/wasmccm/runtime/provider"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
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
	out, err := cluster.Helm(t, "lint", "--strict", chartDir)
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
			if _, err := cloudconfig.Parse(strings.NewReader(cm.Data["cloud-config.yaml"])); err != nil {
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

// twoModulesValues are the chart's values for one manager serving two
// modules: sim from its ConfigMap (twoModulesModule), hcloud pulled from a
// registry with the pull secret hcloud-registry, routes by sim.
const (
	twoModulesValues = "testdata/two-modules.yaml"
	twoModulesModule = "modules[0].module.configMap.base64"
)

// renderTwoModules renders the chart with twoModulesValues, module as the
// sim module's ConfigMap and set as further --set arguments. The pull
// secret, which the cluster's administrator creates, is added.
func renderTwoModules(t *testing.T, module []byte, set ...string) []manifest {
	t.Helper()
	out, err := helmTemplateValues(t, twoModulesValues, twoModulesModule, module, set...)
	if err != nil {
		t.Fatal(err)
	}
	pullSecret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": string(corev1.SecretTypeDockerConfigJson),
		"metadata":   map[string]any{"name": "hcloud-registry", "namespace": systemNamespace},
		"stringData": map[string]any{corev1.DockerConfigJsonKey: `{"auths":{}}`},
	}}
	return append(splitChartOutput(t, out), manifest{file: "administrator", obj: pullSecret})
}

// TestChartSeveralModules renders the chart for two modules and checks
// that the cloud-config is one the CCM accepts, with the routes given,
// that each module's file, pull cache, pull secret and credentials are on
// volumes of its own where its cloud-config says, and that the Role grants
// exactly the modules' last-known-good records.
func TestChartSeveralModules(t *testing.T) {
	module := gzipBytes(t, emptyModule)
	tests := []struct {
		name       string
		set        []string
		wantRoutes string
		// wantRecords are the records the Role grants, by module.
		wantRecords []string
	}{
		{name: "as in the values file", wantRoutes: "sim", wantRecords: []string{"sim", "hcloud"}},
		{name: "no routes", set: []string{"routes.module="}, wantRecords: []string{"sim", "hcloud"}},
		{name: "one record renamed and one disabled", wantRoutes: "sim", wantRecords: []string{"sim"},
			set: []string{"modules[0].module.lastKnownGood.name=sim-record", "modules[1].module.lastKnownGood.enabled=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := renderTwoModules(t, module, tt.set...)
			for _, m := range all {
				typed(t, m.obj)
				if name := m.obj.GetName(); name == "wasm-provider-module" || name == "wasm-provider-credentials" {
					t.Errorf("the chart renders the one module's %s", m)
				}
			}
			dep := as[*appsv1.Deployment](t, all, "Deployment", deploymentName)
			files := newPodFiles(t, all, &dep.Spec.Template.Spec)
			cfg := loadCloudConfig(t, files, dep, false)
			args := dep.Spec.Template.Spec.Containers[0].Args

			if cfg.Routes != tt.wantRoutes {
				t.Errorf("routes = %q, want %q", cfg.Routes, tt.wantRoutes)
			}
			if got, want := flagValue(t, args, "configure-cloud-routes"), strconv.FormatBool(tt.wantRoutes != ""); got != want {
				t.Errorf("--configure-cloud-routes=%s with routes %q, want %s", got, cfg.Routes, want)
			}
			if got := flagValue(t, args, "cluster-name"); cfg.ClusterName != got {
				t.Errorf("clusterName %q, --cluster-name %q", cfg.ClusterName, got)
			}
			names := make([]string, len(cfg.Modules))
			for i, m := range cfg.Modules {
				names[i] = m.Name
			}
			if !slices.Equal(names, []string{"sim", "hcloud"}) {
				t.Fatalf("modules %v, want sim and hcloud in the values' order", names)
			}
			sim, hcloud := cfg.Modules[0], cfg.Modules[1]
			if sim.Nodes.ProviderIDPrefix != "simcloud://" || sim.Nodes.Selector == nil || !sim.LoadBalancers.Default ||
				hcloud.Nodes.NamePattern != "hc-*" || !slices.Equal(hcloud.LoadBalancers.Classes, []string{"example.com/hcloud"}) {
				t.Errorf("nodes and loadBalancers are not the values': sim %+v %+v, hcloud %+v %+v",
					sim.Nodes, sim.LoadBalancers, hcloud.Nodes, hcloud.LoadBalancers)
			}

			// Each module's volumes are its own: no volume serves two.
			owner := map[string]string{}
			onOwnVolume := func(module, what, path string) (string, mount) {
				t.Helper()
				file, m, ok := files.resolve(path)
				if !ok {
					t.Fatalf("%s %s %s is on no volume", module, what, path)
				}
				if other, ok := owner[m.volume.Name]; ok && other != module {
					t.Errorf("%s %s is on volume %s, %s's too", module, what, m.volume.Name, other)
				}
				owner[m.volume.Name] = module
				return file, m
			}

			file, m := onOwnVolume("sim", "module.path", sim.Module.Path)
			if m.volume.ConfigMap == nil || m.volume.ConfigMap.Name != "wasm-provider-module-sim" || filepath.Dir(sim.Module.Path) != "/etc/wasmccm/modules/sim" {
				t.Errorf("sim module.path %s is not in /etc/wasmccm/modules/sim, the wasm-provider-module-sim volume", sim.Module.Path)
			}
			if wasm, err := provider.ReadModule(cloudconfig.Module{Path: file}); err != nil || !bytes.Equal(wasm, emptyModule) {
				t.Errorf("sim module: %x (%v), want %x", wasm, err, emptyModule)
			}

			if hcloud.Module.Image != "registry.example/hcloud@"+testDigest || hcloud.Module.Path != "" {
				t.Errorf("hcloud module %+v, want the registry reference", hcloud.Module)
			}
			if _, m := onOwnVolume("hcloud", "module.imageCacheDir", hcloud.Module.ImageCacheDir); m.volume.EmptyDir == nil || m.readOnly {
				t.Errorf("hcloud module.imageCacheDir %s is not on a writable emptyDir", hcloud.Module.ImageCacheDir)
			}
			file, m = onOwnVolume("hcloud", "module.registryConfig", hcloud.Module.RegistryConfig)
			if m.volume.Secret == nil || m.volume.Secret.SecretName != "hcloud-registry" {
				t.Errorf("hcloud module.registryConfig %s is not the pull secret", hcloud.Module.RegistryConfig)
			} else if _, err := os.Stat(file); err != nil {
				t.Errorf("hcloud module.registryConfig: %v", err)
			}

			for _, mod := range cfg.Modules {
				dir, m := onOwnVolume(mod.Name, "credentials.dir", mod.Credentials.Dir)
				if m.volume.Secret == nil || m.volume.Secret.SecretName != "wasm-provider-credentials-"+mod.Name || mod.Credentials.Dir != "/etc/wasmccm/credentials/"+mod.Name {
					t.Errorf("%s credentials.dir %s on volume %s, want /etc/wasmccm/credentials/%[1]s on the Secret wasm-provider-credentials-%[1]s", mod.Name, mod.Credentials.Dir, m.volume.Name)
					continue
				}
				for _, key := range mod.Credentials.SecretKeys() {
					// The values file gives each module a token of its own.
					if data, err := os.ReadFile(filepath.Join(dir, key)); err != nil || string(data) != mod.Name+"-token" {
						t.Errorf("%s credential %s = %q (%v), want %q", mod.Name, key, data, err, mod.Name+"-token")
					}
				}
			}

			// The manager adds up every module's worst case (runtime/assembly).
			need := membudget.HostBaselineMiB
			for _, mod := range cfg.Modules {
				need += membudget.New(mod.Limits.PoolSize, int(mod.Limits.MemoryLimitMiB), int(mod.Limits.StackLimitMiB), int(mod.Limits.SharedStateMiB), 2).ModuleMiB()
			}
			if limit := dep.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; limit.Value() < int64(need)<<20 {
				t.Errorf("the modules need %d MiB, the container has %s", need, &limit)
			}

			var want []string
			for _, mod := range cfg.Modules {
				if slices.Contains(tt.wantRecords, mod.Name) != !mod.Module.LastKnownGood.Disabled {
					t.Errorf("%s module.lastKnownGood %+v, want it on: %v", mod.Name, mod.Module.LastKnownGood, slices.Contains(tt.wantRecords, mod.Name))
				}
				if !mod.Module.LastKnownGood.Disabled {
					want = append(want, provider.LastKnownGoodChunkNames(mod.Module.LastKnownGood)...)
				}
			}
			role := as[*rbacv1.Role](t, all, "Role", "wasm-cloud-controller-manager:last-known-good")
			if got := role.Rules[0].ResourceNames; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("the last-known-good Role grants %v, want exactly %v", got, want)
			}
		})
	}
}

// TestChartSeveralModulesRefused checks the settings of several modules
// the chart refuses, as the CCM would at start-up, and the keys it does
// not know.
func TestChartSeveralModulesRefused(t *testing.T) {
	module := gzipBytes(t, emptyModule)
	tests := []struct {
		name    string
		set     []string
		wantErr string
	}{
		{"a name twice", []string{"modules[1].name=sim"}, `modules[1].name "sim": the name is used twice`},
		{"a name that is no DNS label", []string{"modules[0].name=Sim"}, `modules[0].name "Sim": want a DNS label`},
		{"a name too long for its volumes", []string{"modules[0].name=" + strings.Repeat("s", 50)}, "at most 49 characters"},
		{"two default Node modules", []string{"modules[0].nodes.default=true", "modules[1].nodes.default=true"},
			"nodes.default is set on 2 modules (sim, hcloud): at most one"},
		{"two default load balancer modules", []string{"modules[1].loadBalancers.default=true"},
			"loadBalancers.default is set on 2 modules (sim, hcloud): at most one"},
		{"a class twice", []string{"modules[0].loadBalancers.classes={example.com/hcloud}"},
			`modules[1].loadBalancers.classes: "example.com/hcloud" is served by sim too`},
		{"a record twice", []string{"modules[1].module.lastKnownGood.name=wasmccm-last-known-good-sim"},
			`modules[1].module.lastKnownGood.name "wasmccm-last-known-good-sim" is sim's too`},
		{"routes by an unknown module", []string{"routes.module=aws"}, `routes.module: no module is named "aws"`},
		{"an unknown key", []string{"modules[1].lastKnownGood.enabled=false"}, `modules[1]: unknown key "lastKnownGood"`},
		{"a module without its file name", []string{"modules[0].module.fileName="}, "modules[0].module.source configMap needs modules[0].module.fileName"},
		{"a registry tag", []string{"modules[1].module.registry.reference=registry.example/hcloud:v1"},
			`modules[1].module.registry.reference "registry.example/hcloud:v1" has no @sha256: digest`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helmTemplateValues(t, twoModulesValues, twoModulesModule, module, tt.set...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("helm template error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	t.Run("routes.module with one module", func(t *testing.T) {
		_, err := helmTemplate(t, module, "routes.module=sim")
		if want := "but modules is empty"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("helm template error = %v, want one containing %q", err, want)
		}
	})
}
