package deploy_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// saGroups are the groups of the CCM's ServiceAccount.
var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"}

// TestOnCluster runs the manifests of each source against a real API
// server with RBAC, one fresh cluster each: every object is accepted, and
// the ServiceAccount can do exactly what the cloud controllers, leader
// election and delegated authentication need.
func TestOnCluster(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) { testOnCluster(t, src) })
	}
}

func testOnCluster(t *testing.T, src source) {
	all := src.load(t, gzipBytes(t, emptyModule))
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adminCfg := fastClient(c.Config)
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	waitForBootstrap(t, ctx, admin)

	t.Run("server-side dry run", func(t *testing.T) {
		for _, m := range all {
			t.Run(m.String(), func(t *testing.T) {
				if err := create(ctx, t, adminCfg, m.obj, true); err != nil {
					t.Fatal(err)
				}
			})
		}
	})

	if src.name == "kustomize" {
		t.Run("module ConfigMap size limit", func(t *testing.T) { testConfigMapLimit(ctx, t, adminCfg, admin) })
	} else {
		t.Run("server-side dry run of every module source", func(t *testing.T) { testChartModuleSources(ctx, t, adminCfg) })
	}

	rbacApplied := t.Run("create ServiceAccount and RBAC", func(t *testing.T) {
		for _, m := range all {
			if m.file == "serviceaccount.yaml" || m.file == "rbac.yaml" {
				if err := create(ctx, t, adminCfg, m.obj, false); err != nil {
					t.Fatalf("%s: %v", m, err)
				}
			}
		}
	})
	if !rbacApplied {
		t.FailNow()
	}

	t.Run("access review", func(t *testing.T) { testAccessReview(ctx, t, admin) })

	sa := newServiceAccountClient(ctx, t, adminCfg, admin)
	t.Run("controllers as the ServiceAccount", func(t *testing.T) { testControllers(ctx, t, admin, sa) })
	t.Run("leader election as the ServiceAccount", func(t *testing.T) { testLeaderElection(ctx, t, admin, sa) })
	t.Run("delegated authentication as the ServiceAccount", func(t *testing.T) { testDelegatedAuth(ctx, t, sa) })
	t.Run("denied to the ServiceAccount", func(t *testing.T) { testDenied(ctx, t, admin, sa) })
	t.Run("manager binary as the ServiceAccount", func(t *testing.T) { testBinary(ctx, t, c, admin, sa, src) })
	sa.assertNoForbidden(t)
}

// testConfigMapLimit checks that the limit render.sh enforces is the API
// server's.
func testConfigMapLimit(ctx context.Context, t *testing.T, adminCfg *rest.Config, admin kubernetes.Interface) {
	payload := make([]byte, configMapMaxBytes)
	copy(payload, []byte{0x1f, 0x8b})
	out, err := render(t, payload)
	if err != nil {
		t.Fatalf("render.sh refuses %d bytes: %v", len(payload), err)
	}
	docs := decodeDocuments(t, "render.sh output", out)
	if err := create(ctx, t, adminCfg, docs[0].obj, true); err != nil {
		t.Fatalf("the largest module render.sh accepts is refused by the API server: %v", err)
	}
	over := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "wasm-provider-module", Namespace: systemNamespace},
		BinaryData: map[string][]byte{moduleKey: append(payload, 0)},
	}
	_, err = admin.CoreV1().ConfigMaps(systemNamespace).Create(ctx, over, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a module one byte larger than render.sh accepts: error %v, want Invalid (the limit render.sh enforces is the API server's)", err)
	}
}

// fastClient lifts client-go's default rate limit of 5 requests a second,
// which would dominate these tests' run time.
func fastClient(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// waitForBootstrap waits for what kube-apiserver creates at start-up and the
// manifests refer to.
func waitForBootstrap(t testing.TB, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	checks := map[string]func(context.Context) error{
		"namespace kube-system": func(ctx context.Context) error {
			_, err := admin.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
			return err
		},
		"namespace default": func(ctx context.Context) error {
			_, err := admin.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
			return err
		},
		// Published by kube-apiserver (it has a client CA); the CCM's
		// delegated authentication reads it.
		"ConfigMap extension-apiserver-authentication": func(ctx context.Context) error {
			_, err := admin.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			return err
		},
		"Role extension-apiserver-authentication-reader": func(ctx context.Context) error {
			_, err := admin.RbacV1().Roles(systemNamespace).Get(ctx, "extension-apiserver-authentication-reader", metav1.GetOptions{})
			return err
		},
		"ClusterRole system:auth-delegator": func(ctx context.Context) error {
			_, err := admin.RbacV1().ClusterRoles().Get(ctx, "system:auth-delegator", metav1.GetOptions{})
			return err
		},
		"PriorityClass system-cluster-critical": func(ctx context.Context) error {
			_, err := admin.SchedulingV1().PriorityClasses().Get(ctx, "system-cluster-critical", metav1.GetOptions{})
			return err
		},
	}
	for name, check := range checks {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = check(ctx)
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("%s never appeared: %v", name, last)
		}
	}
}

// warnings collects the API server's warnings, which a clean manifest
// does not draw.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// create creates obj with the dynamic client, strictly: unknown or
// duplicate fields and warnings are errors. With dryRun nothing is stored.
func create(ctx context.Context, t testing.TB, cfg *rest.Config, obj *unstructured.Unstructured, dryRun bool) error {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	warned := &warnings{}
	cfg.WarningHandler = warned
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper, err := newMapper(cfg)
	if err != nil {
		return err
	}
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s %s has no namespace", gvk.Kind, obj.GetName())
		}
		ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Create(ctx, obj.DeepCopy(), opts); err != nil {
		return err
	}
	if len(warned.text) > 0 {
		return fmt.Errorf("accepted with warnings: %q", warned.text)
	}
	return nil
}

var (
	mappersMu sync.Mutex
	mappers   = map[string]meta.RESTMapper{}
)

// newMapper returns a discovery-based RESTMapper for the API server at
// cfg.Host, built once per server.
func newMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	mappersMu.Lock()
	defer mappersMu.Unlock()
	if m, ok := mappers[cfg.Host]; ok {
		return m, nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(client.Discovery())
	if err != nil {
		return nil, err
	}
	m := restmapper.NewDiscoveryRESTMapper(groups)
	mappers[cfg.Host] = m
	return m, nil
}

// access is one request the ServiceAccount may or may not make.
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	if a.namespace != "" {
		r += " in " + a.namespace
	}
	return a.verb + " " + r
}

// testAccessReview asks the API server's authorizer, request by request,
// whether the ServiceAccount may make it.
func testAccessReview(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	const (
		core, coord, events = "", "coordination.k8s.io", "events.k8s.io"
		ns, sys             = "team-a", systemNamespace
	)
	// The RBAC objects were just created: the authorizer may not have
	// them yet (a run found the ClusterRole missing on the first case).
	waitAllowed(ctx, t, admin, access{"list", core, "nodes", "", "", ""})
	waitAllowed(ctx, t, admin, access{"get", coord, "leases", "", sys, leaseName})
	checkAccess(ctx, t, admin, []accessCase{
		// Allowed: what the controllers do.
		{access{"list", core, "nodes", "", "", ""}, true, "Node informer (all controllers)"},
		{access{"watch", core, "nodes", "", "", ""}, true, "Node informer (all controllers)"},
		{access{"get", core, "nodes", "", "", "node-1"}, true, "label and taint helpers"},
		{access{"update", core, "nodes", "", "", "node-1"}, true, "cloud-node: providerID, uninitialized taint"},
		{access{"patch", core, "nodes", "", "", "node-1"}, true, "cloud-node labels, lifecycle shutdown taint"},
		{access{"delete", core, "nodes", "", "", "node-1"}, true, "cloud-node-lifecycle: instance gone"},
		{access{"patch", core, "nodes", "status", "", "node-1"}, true, "cloud-node addresses, node-route condition"},
		{access{"list", core, "services", "", "", ""}, true, "Service informer (service-lb)"},
		{access{"watch", core, "services", "", "", ""}, true, "Service informer (service-lb)"},
		{access{"patch", core, "services", "status", ns, "web"}, true, "service-lb: finalizer and status"},
		{access{"create", core, "events", "", ns, ""}, true, "event recorders"},
		{access{"patch", core, "events", "", ns, "e"}, true, "event recorders (aggregation)"},
		{access{"update", core, "events", "", ns, "e"}, true, "event recorders (aggregation)"},
		{access{"create", events, "events", "", ns, ""}, true, "events/v1 recorders"},
		{access{"get", coord, "leases", "", sys, leaseName}, true, "leader election"},
		{access{"update", coord, "leases", "", sys, leaseName}, true, "leader election"},
		{access{"create", coord, "leases", "", sys, ""}, true, "leader election"},
		{access{"get", core, "configmaps", "", sys, "extension-apiserver-authentication"}, true, "delegated authentication"},
		{access{"list", core, "configmaps", "", sys, "extension-apiserver-authentication"}, true, "delegated authentication"},
		{access{"watch", core, "configmaps", "", sys, "extension-apiserver-authentication"}, true, "delegated authentication"},
		{access{"get", core, "configmaps", "", sys, "wasmccm-last-known-good"}, true, "the last-known-good record, read at start"},
		{access{"update", core, "configmaps", "", sys, "wasmccm-last-known-good-b-7"}, true, "the record, rewritten after a promotion"},
		{access{"create", core, "configmaps", "", sys, ""}, true, "the first record (RBAC cannot restrict create by name)"},
		{access{"create", "authentication.k8s.io", "tokenreviews", "", "", ""}, true, "delegated authentication"},
		{access{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""}, true, "delegated authorization"},

		// Denied: nothing the controllers do not need.
		{access{"create", core, "nodes", "", "", ""}, false, "the CCM never creates Nodes"},
		{access{"deletecollection", core, "nodes", "", "", ""}, false, ""},
		{access{"update", core, "nodes", "status", "", "node-1"}, false, "status is only patched"},
		{access{"get", core, "nodes", "proxy", "", "node-1"}, false, ""},
		{access{"get", core, "services", "", ns, "web"}, false, "Services are read from the informer"},
		{access{"create", core, "services", "", ns, ""}, false, ""},
		{access{"update", core, "services", "", ns, "web"}, false, "writes go through services/status"},
		{access{"patch", core, "services", "", ns, "web"}, false, "writes go through services/status"},
		{access{"delete", core, "services", "", ns, "web"}, false, ""},
		{access{"update", core, "services", "status", ns, "web"}, false, "status is only patched"},
		{access{"delete", core, "events", "", ns, "e"}, false, ""},
		{access{"create", core, "endpoints", "", ns, ""}, false, "no endpoints controller in this binary"},
		{access{"create", "discovery.k8s.io", "endpointslices", "", ns, ""}, false, ""},
		{access{"update", core, "persistentvolumes", "", "", "pv-1"}, false, "no volume labelling in this binary"},
		{access{"list", core, "pods", "", "", ""}, false, ""},
		{access{"create", core, "pods", "", ns, ""}, false, ""},
		{access{"create", core, "pods", "eviction", ns, "p"}, false, ""},
		{access{"get", core, "secrets", "", sys, "wasm-provider-credentials"}, false, "credentials come from the volume"},
		{access{"list", core, "secrets", "", "", ""}, false, ""},
		{access{"get", core, "configmaps", "", sys, "wasm-cloud-config"}, false, "the cloud-config comes from the volume"},
		{access{"update", core, "configmaps", "", sys, "extension-apiserver-authentication"}, false, ""},
		{access{"delete", core, "configmaps", "", sys, "wasmccm-last-known-good"}, false, "the record is only rewritten"},
		{access{"update", core, "configmaps", "", sys, "wasm-provider-module"}, false, "only the last-known-good record is writable"},
		{access{"list", core, "configmaps", "", sys, ""}, false, ""},
		{access{"create", core, "configmaps", "", ns, ""}, false, "the record lives in kube-system"},
		{access{"get", coord, "leases", "", sys, "kube-controller-manager"}, false, "only its own Lease"},
		{access{"update", coord, "leases", "", sys, "kube-controller-manager"}, false, "only its own Lease"},
		{access{"delete", coord, "leases", "", sys, leaseName}, false, ""},
		{access{"list", coord, "leases", "", sys, ""}, false, ""},
		{access{"create", coord, "leases", "", ns, ""}, false, "Leases only in kube-system"},
		{access{"create", core, "serviceaccounts", "", sys, ""}, false, "--use-service-account-credentials=false"},
		{access{"create", core, "serviceaccounts", "token", sys, saName}, false, "--use-service-account-credentials=false"},
		{access{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "cluster-admin"}, false, ""},
		{access{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", ""}, false, ""},
		{access{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", ""}, false, ""},
		{access{"impersonate", core, "users", "", "", "admin"}, false, ""},
		{access{"*", "*", "*", "", "", ""}, false, ""},
	})
}

// accessCase is a request and whether the ServiceAccount may make it.
type accessCase struct {
	access
	allowed bool
	why     string
}

// checkAccess asks the API server's authorizer, case by case, whether the
// ServiceAccount may make each request.
func checkAccess(ctx context.Context, t *testing.T, admin kubernetes.Interface, tests []accessCase) {
	for _, tt := range tests {
		t.Run(tt.String(), func(t *testing.T) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   saUser,
				Groups: saGroups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.subresource,
					Namespace: tt.namespace, Name: tt.name,
				},
			}}
			got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tt.allowed {
				t.Errorf("allowed = %v, want %v (%s); reason %q", got.Status.Allowed, tt.allowed, tt.why, got.Status.Reason)
			}
		})
	}
}

// waitAllowed waits until the ServiceAccount may do a, as RBAC objects
// just created take effect.
func waitAllowed(ctx context.Context, t *testing.T, admin kubernetes.Interface, a access) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: saUser, Groups: saGroups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name},
		}}
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the RBAC just created never allowed %v: %v", a, err)
	}
}

// saClient is the CCM's ServiceAccount, authenticated by a real token, with
// a record of every request the API server refused.
type saClient struct {
	config    *rest.Config // records refusals
	bare      *rest.Config // for requests expected to be refused
	token     string
	client    kubernetes.Interface
	mu        sync.Mutex
	forbidden []string
}

func newServiceAccountClient(ctx context.Context, t testing.TB, adminCfg *rest.Config, admin kubernetes.Interface) *saClient {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the ServiceAccount: %v", err)
	}
	sa := &saClient{token: tr.Status.Token}
	sa.bare = fastClient(rest.AnonymousClientConfig(adminCfg))
	sa.bare.BearerToken = sa.token
	sa.config = rest.CopyConfig(sa.bare)
	sa.config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				sa.mu.Lock()
				sa.forbidden = append(sa.forbidden, req.Method+" "+req.URL.Path)
				sa.mu.Unlock()
			}
			return resp, err
		})
	}
	sa.client = kubernetes.NewForConfigOrDie(sa.config)
	return sa
}

// assertNoForbidden fails t if the API server refused any request made
// through sa.config.
func (sa *saClient) assertNoForbidden(t testing.TB) {
	t.Helper()
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if len(sa.forbidden) > 0 {
		slices.Sort(sa.forbidden)
		t.Errorf("requests of the ServiceAccount refused by RBAC:\n  %s", strings.Join(slices.Compact(sa.forbidden), "\n  "))
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// testDelegatedAuth makes the requests the secure port's delegated
// authentication and authorization make.
func testDelegatedAuth(ctx context.Context, t *testing.T, sa *saClient) {
	cm, err := sa.client.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the authentication ConfigMap: %v", err)
	}
	if cm.Data["client-ca-file"] == "" && cm.Data["requestheader-client-ca-file"] == "" {
		t.Errorf("ConfigMap extension-apiserver-authentication holds no CA: keys %v", keys(cm.Data))
	}
	// The dynamic CA loaders list and watch the one ConfigMap by name.
	sel := metav1.ListOptions{FieldSelector: "metadata.name=extension-apiserver-authentication"}
	if _, err := sa.client.CoreV1().ConfigMaps(systemNamespace).List(ctx, sel); err != nil {
		t.Errorf("list the authentication ConfigMap: %v", err)
	}
	sel.TimeoutSeconds = ptr.To[int64](1)
	if w, err := sa.client.CoreV1().ConfigMaps(systemNamespace).Watch(ctx, sel); err != nil {
		t.Errorf("watch the authentication ConfigMap: %v", err)
	} else {
		w.Stop()
	}

	tr, err := sa.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: sa.token},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != saUser {
		t.Errorf("TokenReview of its own token: authenticated %v as %q, want %q", tr.Status.Authenticated, tr.Status.User.Username, saUser)
	}
	sar, err := sa.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  saUser,
			Groups:                saGroups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	if sar.Status.Allowed {
		t.Errorf("the ServiceAccount may read /metrics; it should not need to")
	}
}

// testDenied makes, as the ServiceAccount, requests it must not be allowed.
func testDenied(ctx context.Context, t *testing.T, admin kubernetes.Interface, sa *saClient) {
	const ns = "e2e-denied"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(sa.bare)
	tests := []struct {
		name string
		do   func() error
	}{
		{"get a Secret in kube-system", func() error {
			_, err := client.CoreV1().Secrets(systemNamespace).Get(ctx, "anything", metav1.GetOptions{})
			return err
		}},
		{"list Secrets", func() error {
			_, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a Pod", func() error {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}},
			}
			_, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}},
		{"delete a Service", func() error {
			return client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		}},
		{"update a Service's spec", func() error {
			s := svc.DeepCopy()
			s.Spec.Type = corev1.ServiceTypeNodePort
			_, err := client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{"create a Node", func() error {
			_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rogue"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete its Lease", func() error {
			return client.CoordinationV1().Leases(systemNamespace).Delete(ctx, leaseName, metav1.DeleteOptions{})
		}},
		{"update the module ConfigMap (only the last-known-good record is writable)", func() error {
			cm, err := client.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "wasm-provider-module", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = client.CoreV1().ConfigMaps(systemNamespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}},
		{"create a ServiceAccount token", func() error {
			_, err := client.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, saName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !apierrors.IsForbidden(err) {
				t.Errorf("error = %v, want Forbidden", err)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestChartSeveralModulesOnCluster sends the chart rendered for two modules
// (testdata/two-modules.yaml) through the API server's server-side dry
// run, then creates its RBAC: the ServiceAccount may read and rewrite both
// modules' last-known-good records, and no other record nor any module's
// ConfigMap or credentials.
func TestChartSeveralModulesOnCluster(t *testing.T) {
	all := renderTwoModules(t, gzipBytes(t, emptyModule))
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adminCfg := fastClient(c.Config)
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	waitForBootstrap(t, ctx, admin)

	t.Run("server-side dry run", func(t *testing.T) {
		for _, m := range all {
			if err := create(ctx, t, adminCfg, m.obj, true); err != nil {
				t.Errorf("%s: %v", m, err)
			}
		}
	})
	for _, m := range all {
		if m.file == "serviceaccount.yaml" || m.file == "rbac.yaml" {
			if err := create(ctx, t, adminCfg, m.obj, false); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
	const core, sys = "", systemNamespace
	// The API server's authorizer learns of new RBAC objects from its
	// informers: wait until the Role and its binding are in effect.
	waitAllowed(ctx, t, admin, access{"update", core, "configmaps", "", sys, "wasmccm-last-known-good-hcloud-a-0"})
	checkAccess(ctx, t, admin, []accessCase{
		{access{"get", core, "configmaps", "", sys, "wasmccm-last-known-good-sim"}, true, "sim's record, read at start"},
		{access{"update", core, "configmaps", "", sys, "wasmccm-last-known-good-sim-b-7"}, true, "sim's record, rewritten"},
		{access{"get", core, "configmaps", "", sys, "wasmccm-last-known-good-hcloud"}, true, "hcloud's record, read at start"},
		{access{"update", core, "configmaps", "", sys, "wasmccm-last-known-good-hcloud-a-0"}, true, "hcloud's record, rewritten"},
		{access{"create", core, "configmaps", "", sys, ""}, true, "the first records (RBAC cannot restrict create by name)"},
		{access{"get", core, "configmaps", "", sys, "wasmccm-last-known-good"}, false, "the one module's record is no module's here"},
		{access{"update", core, "configmaps", "", sys, "wasmccm-last-known-good-b-0"}, false, "the one module's record is no module's here"},
		{access{"get", core, "configmaps", "", sys, "wasmccm-last-known-good-aws"}, false, "no module is named aws"},
		{access{"delete", core, "configmaps", "", sys, "wasmccm-last-known-good-sim"}, false, "a record is only rewritten"},
		{access{"update", core, "configmaps", "", sys, "wasm-provider-module-sim"}, false, "only the records are writable"},
		{access{"get", core, "configmaps", "", sys, "wasm-cloud-config"}, false, "the cloud-config comes from the volume"},
		{access{"get", core, "secrets", "", sys, "wasm-provider-credentials-hcloud"}, false, "credentials come from the volume"},
		{access{"get", core, "secrets", "", sys, "hcloud-registry"}, false, "the pull secret comes from the volume"},
	})
}
