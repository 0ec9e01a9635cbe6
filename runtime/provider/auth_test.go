package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/events"
)

// TestAuthFailureEvent: a credential whose Secret key is missing fails
// the simcloud module's calls with an error naming it, never "not found",
// and puts one CloudAuthFailed Event on the Pod however many calls fail.
func TestAuthFailureEvent(t *testing.T) {
	cloud := simcloud.New(simcloud.Options{Token: "t"})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	if _, err := cloud.AddInstance(simcloud.Instance{Name: "node-0", Zone: "sim-1a", Region: "sim-1", State: "running"}); err != nil {
		t.Fatal(err)
	}
	wasm, _ := lifecycletest.SimcloudModule(t, "simcloud")
	c := newCloud(t, wasm, func(cfg *cloudconfig.Config) {
		cfg.HTTP.AllowedOrigins = []string{srv.URL}
		cfg.Credentials = credentials.Config{Dir: t.TempDir(), Auth: []credentials.AuthConfig{{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}}
		cfg.ProviderConfig = []byte(fmt.Sprintf(`{"endpoint":%q,"tokenCredential":"token"}`, srv.URL))
	})
	recorder := record.NewFakeRecorder(10)
	c.events = &moduleEvents{started: true, recorder: recorder, pod: &v1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "ccm"}}

	i, _ := c.InstancesV2()
	for range 3 {
		exists, err := i.InstanceExists(context.Background(), node("node-0"))
		if err == nil || exists || errors.Is(err, cloudprovider.InstanceNotFound) ||
			!strings.Contains(err.Error(), `credential "token": key "token" is not in the credentials directory`) {
			t.Fatalf("InstanceExists = %v, %v; want an error naming the credential", exists, err)
		}
	}
	if got := len(recorder.Events); got != 1 {
		t.Fatalf("%d Events, want 1 (at most one per credential a minute)", got)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Warning "+string(events.CloudAuthFailed)+` credential "token": key "token"`) {
		t.Fatalf("Event %q", e)
	}
}
