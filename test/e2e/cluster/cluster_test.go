package cluster_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// TestCluster checks the round trip a cloud controller manager test relies
// on: objects written through the admin config are stored and read back,
// and the written kubeconfig reaches the same API server.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := cluster.StartForTest(t)
	t.Logf("cluster ready in %v at %s", time.Since(start).Round(time.Millisecond), c.Config.Host)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"e2e": "true"}},
		Spec:       corev1.NodeSpec{ProviderID: "wasmccm://node-1"},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}

	gotNS, err := client.CoreV1().Namespaces().Get(ctx, "e2e", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace: %v", err)
	}
	if gotNS.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace phase = %q, want %q", gotNS.Status.Phase, corev1.NamespaceActive)
	}

	// Read the node through the kubeconfig to cover WriteKubeconfig too.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	gotNode, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node via kubeconfig: %v", err)
	}
	if gotNode.Spec.ProviderID != "wasmccm://node-1" || gotNode.Labels["e2e"] != "true" {
		t.Errorf("node read back as providerID=%q labels=%v", gotNode.Spec.ProviderID, gotNode.Labels)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
