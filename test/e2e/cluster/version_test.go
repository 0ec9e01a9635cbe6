package cluster

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// TestKubeVersion checks that the three places naming the default release
// agree: KubeVersion, the install scripts' default (hack/lib.sh) and the
// k8s.io/* libraries in go.mod (v0.X.Y for release v1.X.Y).
func TestKubeVersion(t *testing.T) {
	lib, err := os.ReadFile("../../../hack/lib.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^WASMCCM_KUBE_VERSION=(\S+)$`).FindSubmatch(lib)
	if m == nil {
		t.Fatal("hack/lib.sh sets no WASMCCM_KUBE_VERSION")
	}
	if got := string(m[1]); got != KubeVersion {
		t.Errorf("hack/lib.sh defaults to %s, KubeVersion is %s", got, KubeVersion)
	}

	gomod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m = regexp.MustCompile(`(?m)^\s+k8s\.io/client-go (v0\.\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/client-go")
	}
	if got := "v1." + strings.TrimPrefix(string(m[1]), "v0."); got != KubeVersion {
		t.Errorf("go.mod's k8s.io/client-go %s is release %s, KubeVersion is %s", m[1], got, KubeVersion)
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", KubeVersion},
		{"v1.36.3", "v1.36.3"},
	} {
		t.Setenv(versionEnv, tc.env)
		if got := Version(); got != tc.want {
			t.Errorf("with %s=%q: Version() = %s, want %s", versionEnv, tc.env, got, tc.want)
		}
	}
}

// TestCheckServerVersion runs the check against a fake /version: a skew
// run must fail when the API server is not the release asked for.
func TestCheckServerVersion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"})
	}))
	defer srv.Close()
	for _, tc := range []struct {
		want    string
		wantErr bool
	}{
		{"v1.36.3", false},
		{"v1.37.2", true},
	} {
		err := checkServerVersion(&rest.Config{Host: srv.URL}, tc.want)
		if (err != nil) != tc.wantErr {
			t.Errorf("want %s: err = %v, want error %v", tc.want, err, tc.wantErr)
		}
	}
}
