package deploy_test

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/provider"
	"github.com/wasmccm/wasmccm/runtime/wasmfile"
)

// TestManifestsAreValidObjects decodes every object into its Go type with
// unknown fields rejected, and checks that the expected set is there.
func TestManifestsAreValidObjects(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) { testValidObjects(t, src.load(t, gzipBytes(t, emptyModule))) })
	}
}

func testValidObjects(t *testing.T, all []manifest) {
	for _, m := range all {
		t.Run(m.String(), func(t *testing.T) {
			typed(t, m.obj)
		})
	}
	want := []string{
		"cloud-config.yaml: ConfigMap kube-system/wasm-cloud-config",
		"credentials-secret.yaml: Secret kube-system/wasm-provider-credentials",
		"deployment.yaml: Deployment kube-system/wasm-cloud-controller-manager",
		"module-configmap.yaml: ConfigMap kube-system/wasm-provider-module",
		"rbac.yaml: ClusterRole /wasm-cloud-controller-manager",
		"rbac.yaml: ClusterRoleBinding /wasm-cloud-controller-manager",
		"rbac.yaml: ClusterRoleBinding /wasm-cloud-controller-manager:auth-delegator",
		"rbac.yaml: Role kube-system/wasm-cloud-controller-manager:last-known-good",
		"rbac.yaml: Role kube-system/wasm-cloud-controller-manager:leader-election",
		"rbac.yaml: RoleBinding kube-system/wasm-cloud-controller-manager:extension-apiserver-authentication-reader",
		"rbac.yaml: RoleBinding kube-system/wasm-cloud-controller-manager:last-known-good",
		"rbac.yaml: RoleBinding kube-system/wasm-cloud-controller-manager:leader-election",
		"serviceaccount.yaml: ServiceAccount kube-system/wasm-cloud-controller-manager",
	}
	var got []string
	for _, m := range all {
		got = append(got, m.String())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("objects:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestRenderScript checks render.sh: the module lands unchanged (or
// gzip-compressed) in binaryData, and what cannot be a module or cannot fit
// in a ConfigMap is refused.
func TestRenderScript(t *testing.T) {
	gz := gzipBytes(t, emptyModule)
	// A payload of exactly the ConfigMap limit; render.sh checks only the
	// gzip magic, not the stream.
	atLimit := bytes.Repeat([]byte{0}, configMapMaxBytes)
	copy(atLimit, []byte{0x1f, 0x8b})
	text := []byte("apiVersion: v1\nkind: ConfigMap\n")

	tests := []struct {
		name    string
		module  []byte
		args    []string
		want    []byte // the binaryData value, when rendering succeeds
		wantGz  []byte // or what it decompresses to, when render.sh compresses
		wantErr string
	}{
		{name: "gzip module", module: gz, want: gz},
		{name: "plain module is compressed", module: emptyModule, wantGz: emptyModule},
		{name: "at the ConfigMap limit", module: atLimit, want: atLimit},
		{name: "over the ConfigMap limit", module: append(atLimit, 0), wantErr: "a ConfigMap holds at most 1048576"},
		{name: "not a module", module: text, wantErr: "neither a wasm module nor gzip-compressed"},
		{name: "template without placeholder", module: gz, args: []string{filepath.Join(manifestDir, "rbac.yaml")}, wantErr: "want exactly one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, tt.module, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render.sh error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("render.sh: %v", err)
			}
			if bytes.Contains(out, []byte(placeholder)) {
				t.Fatal("the placeholder is still in the output")
			}
			docs := decodeDocuments(t, "render.sh output", out)
			if len(docs) != 1 {
				t.Fatalf("render.sh output has %d objects, want 1", len(docs))
			}
			cm, ok := typed(t, docs[0].obj).(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("render.sh output is a %s, want a ConfigMap", docs[0].obj.GetKind())
			}
			got := cm.BinaryData[moduleKey]
			if tt.want != nil && !bytes.Equal(got, tt.want) {
				t.Fatalf("binaryData[%s] is %d bytes, want the %d bytes given", moduleKey, len(got), len(tt.want))
			}
			if tt.wantGz != nil {
				wasm, err := wasmfile.Decompress(got)
				if err != nil || !bytes.HasPrefix(got, []byte{0x1f, 0x8b}) || !bytes.Equal(wasm, tt.wantGz) {
					t.Fatalf("binaryData[%s] = %x (%v), want the gzip of %x", moduleKey, got, err, tt.wantGz)
				}
			}
		})
	}
}

// podFiles lays out a pod's volumes in a directory as the kubelet mounts
// them, so that paths inside the container can be checked and used.
type podFiles struct {
	mounts map[string]mount // by mountPath
}

type mount struct {
	dir      string
	readOnly bool
	volume   corev1.Volume
}

// newPodFiles fills one directory per volume of pod's first container from
// the ConfigMaps and Secrets among all: data and binaryData keys, or
// stringData keys, become files. emptyDir volumes are empty directories.
func newPodFiles(t testing.TB, all []manifest, pod *corev1.PodSpec) *podFiles {
	t.Helper()
	root := t.TempDir()
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	p := &podFiles{mounts: map[string]mount{}}
	for _, vm := range pod.Containers[0].VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			t.Fatalf("volumeMount %s names no volume", vm.Name)
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Errorf("volumeMount %s uses a subPath: the kubelet never updates such a mount", vm.Name)
		}
		dir := filepath.Join(root, v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		switch {
		case v.ConfigMap != nil:
			cm := as[*corev1.ConfigMap](t, all, "ConfigMap", v.ConfigMap.Name)
			for k, s := range cm.Data {
				files[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				files[k] = b
			}
		case v.Secret != nil:
			s := as[*corev1.Secret](t, all, "Secret", v.Secret.SecretName)
			for k, b := range s.Data {
				files[k] = b
			}
			for k, s := range s.StringData {
				files[k] = []byte(s)
			}
			if len(v.Secret.Items) > 0 {
				// Only the listed keys, under their paths.
				selected := map[string][]byte{}
				for _, item := range v.Secret.Items {
					data, ok := files[item.Key]
					if !ok {
						t.Fatalf("volume %s: Secret %s has no key %s", v.Name, s.Name, item.Key)
					}
					selected[item.Path] = data
				}
				files = selected
			}
		case v.EmptyDir != nil:
		default:
			t.Fatalf("volume %s: unexpected source", v.Name)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p.mounts[vm.MountPath] = mount{dir: dir, readOnly: vm.ReadOnly, volume: v}
	}
	return p
}

// resolve maps a path in the container to the mount holding it.
func (p *podFiles) resolve(containerPath string) (string, mount, bool) {
	for mp, m := range p.mounts {
		if rel, err := filepath.Rel(mp, containerPath); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(m.dir, rel), m, true
		}
	}
	return "", mount{}, false
}

// flagValue returns the value of --name=value in args.
func flagValue(t testing.TB, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s in the Deployment's args", name)
	return ""
}

// loadCloudConfig reads the cloud-config the Deployment's --cloud-config
// names, through its volume, and parses it as the CCM does; sole says
// whether it must be one module's or a list of several.
func loadCloudConfig(t testing.TB, files *podFiles, dep *appsv1.Deployment, sole bool) *cloudconfig.File {
	t.Helper()
	arg := flagValue(t, dep.Spec.Template.Spec.Containers[0].Args, "cloud-config")
	path, _, ok := files.resolve(arg)
	if !ok {
		t.Fatalf("--cloud-config=%s is on no volume", arg)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--cloud-config=%s: %v", arg, err)
	}
	cfg, err := cloudconfig.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the CCM refuses --cloud-config=%s: %v", arg, err)
	}
	if cfg.Sole() != sole {
		t.Fatalf("--cloud-config=%s: one module's: %v, want %v:\n%s", arg, cfg.Sole(), sole, data)
	}
	return cfg
}

// TestCloudConfig parses the embedded cloud-config as the CCM does and
// checks that each path in it is what the Deployment mounts there.
func TestCloudConfig(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) { testCloudConfig(t, src.load(t, gzipBytes(t, emptyModule))) })
	}
}

func testCloudConfig(t *testing.T, all []manifest) {
	dep := as[*appsv1.Deployment](t, all, "Deployment", deploymentName)
	files := newPodFiles(t, all, &dep.Spec.Template.Spec)
	cfg := &loadCloudConfig(t, files, dep, true).Modules[0].Config
	args := dep.Spec.Template.Spec.Containers[0].Args

	var provCfg struct {
		Endpoint        string `json:"endpoint"`
		TokenCredential string `json:"tokenCredential"`
	}
	if err := yaml.UnmarshalStrict(cfg.ProviderConfig, &provCfg); err != nil {
		t.Errorf("providerConfig: %v", err)
	}
	endpoint, err := url.Parse(provCfg.Endpoint)
	if err != nil {
		t.Errorf("providerConfig.endpoint: %v", err)
	}

	checks := []struct {
		name string
		err  error
	}{
		{"module.path is the module ConfigMap's key, a loadable module", func() error {
			path, m, ok := files.resolve(cfg.Module.Path)
			if !ok || m.volume.ConfigMap == nil || m.volume.ConfigMap.Name != "wasm-provider-module" {
				return fmt.Errorf("%s is not on the wasm-provider-module volume", cfg.Module.Path)
			}
			wasm, err := provider.ReadModule(cloudconfig.Module{Path: path, SHA256: cfg.Module.SHA256})
			if err != nil {
				return err
			}
			if !bytes.Equal(wasm, emptyModule) {
				return fmt.Errorf("read %x, want %x", wasm, emptyModule)
			}
			return nil
		}()},
		{"module.reloadInterval is set (hot reload)", func() error {
			if cfg.Module.ReloadInterval.Duration <= 0 {
				return fmt.Errorf("reloadInterval = %v", cfg.Module.ReloadInterval.Duration)
			}
			return nil
		}()},
		{"module.compilationCacheDir is a writable emptyDir", func() error {
			path, m, ok := files.resolve(cfg.Module.CompilationCacheDir)
			if !ok || m.volume.EmptyDir == nil || m.readOnly {
				return fmt.Errorf("%s is not on a writable emptyDir", cfg.Module.CompilationCacheDir)
			}
			if info, err := os.Stat(path); err != nil || !info.IsDir() {
				return fmt.Errorf("%s is not a directory", cfg.Module.CompilationCacheDir)
			}
			return nil
		}()},
		{"credentials.dir is the credentials Secret, holding every key the credentials name", func() error {
			dir, m, ok := files.resolve(cfg.Credentials.Dir)
			if !ok || m.volume.Secret == nil || m.volume.Secret.SecretName != "wasm-provider-credentials" {
				return fmt.Errorf("%s is not the wasm-provider-credentials volume", cfg.Credentials.Dir)
			}
			keys := cfg.Credentials.SecretKeys()
			if len(keys) == 0 {
				return fmt.Errorf("no credential names a Secret key")
			}
			for _, key := range keys {
				if _, err := os.Stat(filepath.Join(dir, key)); err != nil {
					return fmt.Errorf("key %q is not in the Secret", key)
				}
			}
			return nil
		}()},
		{"providerConfig.tokenCredential is applied by the host to the endpoint, and not readable", func() error {
			if len(cfg.Credentials.Readable) > 0 {
				return fmt.Errorf("credentials.readable %v: the module must not read secrets", cfg.Credentials.Readable)
			}
			for _, a := range cfg.Credentials.Auth {
				if a.Name == provCfg.TokenCredential {
					if endpoint == nil || !slices.Contains(a.Origins, endpoint.Scheme+"://"+endpoint.Host) {
						return fmt.Errorf("credential %q is not bound to the endpoint's origin: %v", a.Name, a.Origins)
					}
					return nil
				}
			}
			return fmt.Errorf("%q is not in credentials.auth", provCfg.TokenCredential)
		}()},
		{"providerConfig.endpoint is an allowed origin", func() error {
			if endpoint == nil {
				return fmt.Errorf("no endpoint")
			}
			origin := endpoint.Scheme + "://" + endpoint.Host
			if !slices.Contains(cfg.HTTP.AllowedOrigins, origin) {
				return fmt.Errorf("%s is not in http.allowedOrigins %v", origin, cfg.HTTP.AllowedOrigins)
			}
			return nil
		}()},
		{"clusterName equals --cluster-name", func() error {
			got := provider.HostConfig(cfg, "simcloud").ClusterName
			if want := flagValue(t, args, "cluster-name"); got != want {
				return fmt.Errorf("clusterName %q, --cluster-name %q", got, want)
			}
			return nil
		}()},
		{"guest memory fits the container's memory limit", func() error {
			limit := dep.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
			// Old and new pools overlap during a reload; leave room for the
			// manager itself.
			guests := resource.NewQuantity(int64(2*cfg.Limits.PoolSize)*int64(cfg.Limits.MemoryLimitMiB)<<20, resource.BinarySI)
			guests.Add(resource.MustParse("100Mi"))
			if cfg.Limits.PoolSize == 0 || cfg.Limits.MemoryLimitMiB == 0 || limit.Cmp(*guests) < 0 {
				return fmt.Errorf("limits %+v need %s, the container has %s", cfg.Limits, guests, &limit)
			}
			return nil
		}()},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.err != nil {
				t.Error(c.err)
			}
		})
	}
}

// TestDeployment checks the Deployment's flags with the CCM's own flag
// set and validation, and the pod settings the README promises.
func TestDeployment(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) { testDeployment(t, src.load(t, gzipBytes(t, emptyModule))) })
	}
}

func testDeployment(t *testing.T, all []manifest) {
	dep := as[*appsv1.Deployment](t, all, "Deployment", deploymentName)
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, found %d", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	role := as[*rbacv1.Role](t, all, "Role", "wasm-cloud-controller-manager:leader-election")
	record := as[*rbacv1.Role](t, all, "Role", "wasm-cloud-controller-manager:last-known-good")

	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	noCloud := func(*config.CompletedConfig) cloudprovider.Interface { return nil }
	cmd := app.NewCloudControllerManagerCommand(opts, noCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	if err := cmd.Flags().Parse(ctr.Args); err != nil {
		t.Fatalf("the CCM rejects the Deployment's args: %v", err)
	}
	// --v sets klog's global verbosity; keep this test binary's quiet.
	t.Cleanup(func() { _ = cmd.Flags().Set("v", "0") })
	if err := opts.Validate(app.ControllerNames(app.DefaultInitFuncConstructors), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks); err != nil {
		t.Fatalf("the CCM's validation rejects the Deployment's args: %v", err)
	}

	le := opts.Generic.LeaderElection
	leaseRule := role.Rules[0]
	probes := []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe}
	tolerates := func(key, value string, effect corev1.TaintEffect) bool {
		taint := &corev1.Taint{Key: key, Value: value, Effect: effect}
		return slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), taint, false) })
	}
	sc, psc := ctr.SecurityContext, pod.SecurityContext
	affinity := pod.Affinity
	checks := []struct {
		name string
		ok   bool
	}{
		{"--cloud-provider=wasm", opts.KubeCloudShared.CloudProvider.Name == provider.ProviderName},
		{"--cloud-config is set", opts.KubeCloudShared.CloudProvider.CloudConfigFile != ""},
		{"all four controllers run", slices.Equal(opts.Generic.Controllers, []string{"*"})},
		{"--use-service-account-credentials=false (rbac.yaml grants no token minting)", !opts.KubeCloudShared.UseServiceAccountCredentials},
		{"--configure-cloud-routes with --cluster-cidr", opts.KubeCloudShared.ConfigureCloudRoutes && opts.KubeCloudShared.ClusterCIDR != ""},
		{"leader election on a Lease", le.LeaderElect && le.ResourceLock == "leases"},
		{"the Lease is the one the Role grants", le.ResourceNamespace == role.Namespace &&
			le.ResourceName == leaseName && slices.Equal(leaseRule.ResourceNames, []string{le.ResourceName})},
		{"the last-known-good Role grants the record's ConfigMaps", record.Namespace == role.Namespace &&
			slices.Equal(record.Rules[0].ResourceNames, provider.LastKnownGoodChunkNames(cloudconfig.LastKnownGood{}))},
		{"probes reach /healthz on --bind-address:--secure-port", !slices.ContainsFunc(probes, func(p *corev1.Probe) bool {
			return p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Path != "/healthz" ||
				p.HTTPGet.Port.IntValue() != opts.SecureServing.BindPort || p.HTTPGet.Host != opts.SecureServing.BindAddress.String()
		})},
		{"the secure port is declared (one replica per host)", slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool {
			return int(p.ContainerPort) == opts.SecureServing.BindPort
		})},
		{"two replicas, never on one host", dep.Spec.Replicas != nil && *dep.Spec.Replicas == 2 &&
			affinity != nil && affinity.PodAntiAffinity != nil &&
			slices.ContainsFunc(affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, func(term corev1.PodAffinityTerm) bool {
				return term.TopologyKey == corev1.LabelHostname && term.LabelSelector != nil &&
					term.LabelSelector.MatchLabels["app.kubernetes.io/name"] == dep.Spec.Template.Labels["app.kubernetes.io/name"]
			})},
		{"runs as the ServiceAccount rbac.yaml binds", pod.ServiceAccountName == saName},
		{"system-cluster-critical", pod.PriorityClassName == "system-cluster-critical"},
		{"host network", pod.HostNetwork},
		{"on control-plane nodes", len(pod.NodeSelector) == 1 && pod.NodeSelector["node-role.kubernetes.io/control-plane"] == ""},
		{"tolerates the control-plane taint", tolerates("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule)},
		{"tolerates the uninitialized taint", tolerates(cloudproviderapi.TaintExternalCloudProvider, "true", corev1.TaintEffectNoSchedule)},
		{"tolerates not-ready nodes", tolerates(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule) &&
			tolerates(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute)},
		{"non-root, RuntimeDefault seccomp", psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot &&
			psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"read-only root, no privilege escalation, no capabilities", sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
			sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
			sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"POD_NAME and POD_NAMESPACE from the downward API (module Events)", slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}) && slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		})},
		{"memory request and limit", !ctr.Resources.Requests.Memory().IsZero() && !ctr.Resources.Limits.Memory().IsZero() &&
			!ctr.Resources.Requests.Cpu().IsZero()},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Errorf("not so in the Deployment (args %q)", ctr.Args)
			}
		})
	}
}
