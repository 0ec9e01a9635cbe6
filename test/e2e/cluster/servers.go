package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// adminUser is the identity of Cluster.Config. Membership in system:masters
// bypasses RBAC, so tests can install whatever RBAC objects the code under
// test needs while RBAC stays enforced for every other identity.
const adminUser = "wasmccm-e2e-admin"

// serviceAccountIssuer is required by kube-apiserver; nothing verifies it.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// apiServerFiles are the credentials generated for one kube-apiserver.
type apiServerFiles struct {
	adminToken string
	tokenFile  string            // --token-auth-file
	saKey      string            // service-account signing key, PEM
	saPub      string            // its public key, PEM
	clientCA   string            // --client-ca-file, PEM
	certDir    string            // where kube-apiserver writes its self-signed cert
	nodeTokens map[string]string // by Node name, for the kubelets
}

// freePorts reserves n distinct loopback ports. They are released before
// the servers bind them, so another process could take one in between; the
// window is short, and a collision shows as a clear bind error in the log.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		// Keep each listener open until all are chosen so none repeats.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func loopbackURL(scheme string, port int) string {
	return scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// startEtcd runs a single-member etcd whose client and peer listeners are
// both on loopback. fsync is off: the data is thrown away after the test,
// and syncing would dominate etcd's latency on a busy CI machine.
func startEtcd(binDir, dir, clientURL, peerURL string) (*process, error) {
	const name = "e2e"
	return startProcess("etcd", filepath.Join(binDir, "etcd"), dir, []string{
		"--name=" + name,
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL,
		"--unsafe-no-fsync=true",
	})
}

// startAPIServer runs kube-apiserver on 127.0.0.1:port against etcdURL.
func startAPIServer(binDir, dir string, port int, etcdURL string, files apiServerFiles) (*process, error) {
	return startProcess("kube-apiserver", filepath.Join(binDir, "kube-apiserver"), dir, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + files.certDir,
		"--token-auth-file=" + files.tokenFile,
		// No client presents a certificate, but with a client CA the API
		// server publishes kube-system/extension-apiserver-authentication,
		// which components with delegated authentication (the cloud
		// controller manager's secure port) read, as in a real cluster.
		"--client-ca-file=" + files.clientCA,
		// The Node authorizer gives each kubelet (user system:node:<name>)
		// what its own Node and Pods need, as in a real cluster; other
		// identities are not affected by it.
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + files.saPub,
		"--service-account-signing-key-file=" + files.saKey,
		// Required, but no Service traffic ever flows in these tests.
		"--service-cluster-ip-range=10.0.0.0/24",
		// The endpoints of the "kubernetes" Service may not be loopback
		// addresses; without a reconciler the API server never writes them.
		"--endpoint-reconciler-type=none",
	})
}

// writeAPIServerFiles generates the admin token, a token for the kubelet of
// each of nodes and the service-account key pair in dir. The serving
// certificate is left to kube-apiserver, which creates a self-signed one in
// certDir when given none.
func writeAPIServerFiles(dir string, nodes []string) (apiServerFiles, error) {
	f := apiServerFiles{
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		saKey:      filepath.Join(dir, "sa.key"),
		saPub:      filepath.Join(dir, "sa.pub"),
		clientCA:   filepath.Join(dir, "client-ca.crt"),
		certDir:    filepath.Join(dir, "certs"),
		nodeTokens: map[string]string{},
	}
	f.adminToken = rand.Text()
	// Format: token,user,uid,"group1,group2".
	lines := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", f.adminToken, adminUser, adminUser)
	for _, node := range nodes {
		// The identity the Node authorizer recognizes as that Node's kubelet.
		token, user := rand.Text(), "system:node:"+node
		f.nodeTokens[node] = token
		lines += fmt.Sprintf("%s,%s,%s,\"system:nodes\"\n", token, user, user)
	}
	if err := os.WriteFile(f.tokenFile, []byte(lines), 0o600); err != nil {
		return f, err
	}
	if err := writeSelfSignedCA(f.clientCA); err != nil {
		return f, err
	}
	return f, writeKeyPair(f.saKey, f.saPub)
}

// writeSelfSignedCA writes the certificate of a fresh CA whose key is
// thrown away: it signs nothing.
func writeSelfSignedCA(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "wasmccm-e2e-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return writePEM(path, "CERTIFICATE", der)
}

// writeKeyPair writes a fresh ECDSA P-256 key pair as PEM files.
func writeKeyPair(keyPath, pubPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", der); err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", pub)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
