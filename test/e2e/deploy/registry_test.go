package deploy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmccm/wasmccm/runtime/oci"
)

// pullSecretName is the chart's module.registry.pullSecret in these tests.
const pullSecretName = "module-registry"

// moduleRegistry is an OCI registry on loopback, behind basic
// authentication, as the manager reaches a private registry.
type moduleRegistry struct {
	host           string
	user, password string
}

func startModuleRegistry(t *testing.T) *moduleRegistry {
	t.Helper()
	r := &moduleRegistry{user: "ccm", password: "pull-" + t.Name()}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="modules"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// dockerConfigJSON is the registry's credentials as a docker config.
func (r *moduleRegistry) dockerConfigJSON(t *testing.T) []byte {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(r.user + ":" + r.password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{r.host: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// push uploads module and returns its reference by digest.
func (r *moduleRegistry) push(ctx context.Context, t *testing.T, module []byte) string {
	t.Helper()
	var keychain oci.Options
	keychain.Keychain = oci.DockerConfigKeychain(writeTemp(t, r.dockerConfigJSON(t)))
	ref, err := oci.Push(ctx, module, r.host+"/simcloud:e2e", keychain)
	if err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// pullSecret is the Secret `kubectl create secret docker-registry` makes
// for the registry.
func (r *moduleRegistry) pullSecret(t *testing.T) manifest {
	t.Helper()
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: pullSecretName, Namespace: systemNamespace},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: r.dockerConfigJSON(t)},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	return manifest{file: "pull secret", obj: &unstructured.Unstructured{Object: obj}}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withCustomSection returns wasm with a custom section appended: the same
// module to the runtime, another artifact to a registry.
func withCustomSection(wasm []byte, tag string) []byte {
	const name = "wasmccm.test"
	payload := append(append([]byte{byte(len(name))}, name...), tag...)
	return append(append(bytes.Clone(wasm), 0x00, byte(len(payload))), payload...)
}
