// Command demo runs wasmccm end to end on this machine: a real etcd and
// kube-apiserver on loopback, the simulated cloud (or, with -provider
// hcloud, the fake Hetzner Cloud API; with -provider aws, the fake EC2 and
// ELB APIs; with -provider digitalocean, the fake DigitalOcean API), and
// the wasm-cloud-controller-manager running the matching provider module;
// with -provider hybrid, the simulated cloud and the fake Hetzner Cloud API
// side by side, served by one CCM running both modules. It registers Nodes
// the way kubelets with --cloud-provider=external do (tainted,
// uninitialized), creates LoadBalancer Services, waits for the CCM to
// initialize the Nodes and provision the load balancers, prints the result
// and stops everything (or, with -keep, waits for Ctrl-C).
//
// hack/demo.sh installs what it needs and runs it; see README.md.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

const (
	token         = "demo-token"
	uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding wasm-cloud-controller-manager and simcloud")
	toolchain := flag.String("toolchain", "tinygo", "compiler for the provider module: tinygo or go")
	keep := flag.Bool("keep", false, "keep everything running until interrupted")
	provider := flag.String("provider", "simcloud", "provider module and cloud: simcloud, hcloud (the Hetzner Cloud module against a fake Hetzner API), "+
		"aws (the Amazon EC2 module against a fake EC2 and ELB API), digitalocean (the DigitalOcean module against a fake DigitalOcean API) "+
		"or hybrid (the simcloud and Hetzner Cloud modules in one CCM, each serving its own cloud's Nodes and load balancers)")
	flag.Parse()
	if !slices.Contains([]string{"simcloud", "hcloud", "aws", "digitalocean", "hybrid"}, *provider) {
		fmt.Fprintf(os.Stderr, "demo: -provider %q is not simcloud, hcloud, aws, digitalocean or hybrid\n", *provider)
		os.Exit(2)
	}
	if err := run(*bin, *provider, wasmbuild.Toolchain(*toolchain), *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

// demoCloud is the cloud the demo runs against and how to use it: one
// cloud and its module, or (hybrid) several, each with its own module.
type demoCloud struct {
	// name is the module's name in a cloud-config of several modules.
	name string
	url  string
	// module is the main package of the provider module, from the
	// repository's root.
	module string
	// providerConfig is the cloud-config's providerConfig, in YAML.
	providerConfig string
	// nodes are the Node names the cloud's machines register, as their
	// kubelets would.
	nodes []string
	// auth is the cloud-config's credentials.auth entry for the cloud, and
	// secrets the credential files it reads.
	auth    string
	secrets map[string]string
	// describe prints what the cloud holds.
	describe func() error
	// routing is the module's Node and load balancer rules (YAML) in a
	// cloud-config of several modules, and nodeLabels the labels its
	// Nodes register with, which the rules may select.
	routing    string
	nodeLabels map[string]string

	// parts are the clouds of a hybrid cluster, each served by its own
	// module of one CCM; the fields above are then unused but nodes.
	parts []demoCloud
	// services are the LoadBalancer Services the demo creates.
	services []demoService
}

// demoService is a LoadBalancer Service of the demo, of a
// spec.loadBalancerClass or none, with annotations or none.
type demoService struct {
	name, class string
	annotations map[string]string
}

// defaultServices is the demo's one Service, without class.
var defaultServices = []demoService{{name: "web"}}

func run(bin, provider string, tc wasmbuild.Toolchain, keep bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "wasmccm-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	step("starting etcd and kube-apiserver on 127.0.0.1")
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := cluster.Start(startCtx, cluster.Options{})
	cancel()
	if err != nil {
		return err
	}
	defer c.Stop()
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	names := []string{"worker-a", "worker-b", "worker-c"}
	var cloud demoCloud
	switch provider {
	case "hcloud":
		cloud, err = startHcloud(ctx, names)
	case "aws":
		cloud, err = startAWS(ctx, len(names))
	case "digitalocean":
		cloud, err = startDigitalOcean(ctx, names)
	case "hybrid":
		cloud, err = startHybrid(ctx, bin, dir)
	default:
		cloud, err = startSimcloud(ctx, bin, dir, names)
	}
	if err != nil {
		return err
	}
	names = cloud.nodes
	if cloud.services == nil {
		cloud.services = defaultServices
	}

	configPath, err := writeCloudConfig(dir, cloud, tc)
	if err != nil {
		return err
	}
	step("starting wasm-cloud-controller-manager with %s", configPath)
	logPath := filepath.Join(dir, "ccm.log")
	ccm, err := startCCM(ctx, bin, kubeconfig, configPath, cloud.parts == nil, logPath)
	if err != nil {
		return err
	}
	defer func() { ccm.Process.Signal(syscall.SIGTERM); ccm.Wait() }()

	step("registering %d Nodes tainted node.cloudprovider.kubernetes.io/uninitialized", len(names))
	for i, name := range names {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: cloud.labelsOf(name)},
			Spec: v1.NodeSpec{
				Taints:   []v1.Taint{{Key: uninitialized, Value: "true", Effect: v1.TaintEffectNoSchedule}},
				PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i+1)},
				PodCIDR:  fmt.Sprintf("10.244.%d.0/24", i+1),
			},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, s := range cloud.services {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "default", Annotations: s.annotations},
			Spec: v1.ServiceSpec{
				Type:     v1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": s.name},
				Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		switch {
		case s.class != "":
			svc.Spec.LoadBalancerClass = &s.class
			step("creating Service default/%s of type LoadBalancer, class %s", s.name, s.class)
		case s.annotations != nil:
			step("creating Service default/%s of type LoadBalancer, annotated %v", s.name, s.annotations)
		default:
			step("creating Service default/%s of type LoadBalancer", s.name)
		}
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	step("waiting for the CCM")
	if err := waitFor(ctx, 90*time.Second, func() (bool, error) { return converged(ctx, client, names, cloud.services) }); err != nil {
		tail, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\nCCM log:\n%s", err, lastLines(string(tail), 30))
	}
	if err := printState(ctx, client, cloud); err != nil {
		return err
	}
	if keep {
		fmt.Printf("\nkubeconfig: %s\ncloud API: %s\nCCM log: %s\nPress Ctrl-C to stop.\n", kubeconfig, cloud.url, logPath)
		<-ctx.Done()
	}
	return nil
}

// startSimcloud runs the simulated cloud as its own process, seeded with
// one instance per Node name.
func startSimcloud(ctx context.Context, bin, dir string, names []string) (demoCloud, error) {
	var seed []simcloud.Instance
	for i, name := range names {
		seed = append(seed, simcloud.Instance{
			Name: name, Zone: fmt.Sprintf("sim-1%c", 'a'+i), Region: "sim-1", Type: "sim.medium", State: "running",
			Addresses: []simcloud.Address{
				{Type: "InternalIP", Address: fmt.Sprintf("10.0.0.%d", 10+i)},
				{Type: "ExternalIP", Address: fmt.Sprintf("198.51.100.%d", 10+i)},
			},
			Labels: map[string]string{"simcloud.example/pool": "general"},
		})
	}
	seedPath := filepath.Join(dir, "instances.json")
	data, _ := json.Marshal(seed)
	if err := os.WriteFile(seedPath, data, 0o644); err != nil {
		return demoCloud{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return demoCloud{}, err
	}
	url := "http://" + addr
	step("starting the simulated cloud at %s with %d instances", url, len(names))
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "simcloud"), "--listen", addr, "--token", token, "--seed-instances", seedPath)
	cmd.Stderr, _ = os.Create(filepath.Join(dir, "simcloud.log"))
	if err := cmd.Start(); err != nil {
		return demoCloud{}, err
	}
	go cmd.Wait()
	cloud := demoCloud{url: url, module: "modules/simcloud/module", nodes: names, auth: bearerAuth(url), secrets: map[string]string{"token": token},
		providerConfig: fmt.Sprintf("{endpoint: %q, tokenCredential: token}", url),
		describe:       func() error { return describeSimcloud(url) }}
	return cloud, waitFor(ctx, 10*time.Second, func() (bool, error) {
		resp, err := http.Get(url + "/admin/state")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// startHcloud serves the fake Hetzner Cloud API from this process, with a
// private network and one server per Node name in it.
func startHcloud(ctx context.Context, names []string) (demoCloud, error) {
	fake := hcloudfake.New(hcloudfake.Options{Token: token, ActionPolls: 1})
	network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		return demoCloud{}, err
	}
	locations := []string{"fsn1", "nbg1", "hel1"}
	for i, name := range names {
		if _, err := fake.AddServer(hcloudfake.Server{Name: name, Type: "cpx21", Location: locations[i%len(locations)], Network: network.ID}); err != nil {
			return demoCloud{}, err
		}
	}
	url, err := serve(ctx, fake.Handler())
	if err != nil {
		return demoCloud{}, err
	}
	step("serving the fake Hetzner Cloud API at %s/v1 with %d servers in network k8s", url, len(names))
	return demoCloud{url: url, module: "modules/hcloud/module", nodes: names, auth: bearerAuth(url), secrets: map[string]string{"token": token},
		providerConfig: fmt.Sprintf("{endpoint: %q, tokenCredential: token, network: k8s, callTimeout: 8s, loadBalancers: {location: fsn1}}", url+"/v1"),
		describe: func() error {
			fmt.Println("\nIn the fake Hetzner Cloud:")
			for _, lb := range fake.LoadBalancers() {
				var targets []string
				for _, t := range lb.Targets {
					targets = append(targets, fmt.Sprint(t.Server.ID))
				}
				fmt.Printf("  load balancer %s  type=%s  location=%s  ipv4=%s  target servers=%s\n", lb.Name, lb.LoadBalancerType.Name,
					lb.Location.Name, lb.PublicNet.IPv4.IP, strings.Join(targets, ","))
			}
			n, _ := fake.Network(network.ID)
			for _, r := range n.Routes {
				fmt.Printf("  route %s via %s\n", r.Destination, r.Gateway)
			}
			return nil
		}}, nil
}

// startHybrid starts the simulated cloud and the fake Hetzner Cloud API,
// each for the Nodes of its own module in one CCM: module sim serves the
// Nodes labelled wasmccm.io/cloud=sim and the Services without a class,
// module hcloud the Nodes named hc-* and the Services of class
// example.com/hcloud (the routing of examples/hybrid/cloud-config.yaml).
func startHybrid(ctx context.Context, bin, dir string) (demoCloud, error) {
	sim, err := startSimcloud(ctx, bin, dir, []string{"sim-a", "sim-b"})
	if err != nil {
		return demoCloud{}, err
	}
	sim.name, sim.nodeLabels = "sim", map[string]string{"wasmccm.io/cloud": "sim"}
	sim.routing = `nodes:
  providerIDPrefix: "simcloud://"
  selector: {matchLabels: {wasmccm.io/cloud: sim}}
loadBalancers: {default: true}
`
	hc, err := startHcloud(ctx, []string{"hc-a", "hc-b"})
	if err != nil {
		return demoCloud{}, err
	}
	hc.name = "hcloud"
	hc.routing = `nodes: {providerIDPrefix: "hcloud://", namePattern: "hc-*"}
loadBalancers: {classes: [example.com/hcloud]}
`
	return demoCloud{
		url: fmt.Sprintf("%s (simulated cloud), %s (fake Hetzner Cloud)", sim.url, hc.url), nodes: append(slices.Clone(sim.nodes), hc.nodes...),
		parts: []demoCloud{sim, hc}, services: []demoService{{name: "web"}, {name: "web-hetzner", class: "example.com/hcloud"}},
		describe: func() error { return errors.Join(sim.describe(), hc.describe()) },
	}, nil
}

// labelsOf returns the labels Node name registers with: those of the
// part of a hybrid cluster it belongs to.
func (c demoCloud) labelsOf(name string) map[string]string {
	for _, part := range c.parts {
		if slices.Contains(part.nodes, name) {
			return part.nodeLabels
		}
	}
	return c.nodeLabels
}

// serve serves a fake cloud API from this process on a free loopback port
// until ctx ends, and returns its URL.
func serve(ctx context.Context, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	go func() { <-ctx.Done(); srv.Close() }()
	return "http://" + l.Addr().String(), nil
}

// startAWS serves the fake EC2 and ELB APIs from this process, with the
// cluster's route table and n instances tagged for the cluster, one per
// zone. Their Nodes are named after their private DNS names, as kubelets
// on EC2 register.
func startAWS(ctx context.Context, n int) (demoCloud, error) {
	fake := awsfake.New(awsfake.Options{})
	tags := map[string]string{"kubernetes.io/cluster/demo": "owned"}
	table, err := fake.AddRouteTable("", tags)
	if err != nil {
		return demoCloud{}, err
	}
	var nodes []string
	for i := range n {
		in, err := fake.AddInstance(awsfake.Instance{Type: "m5.large", Zone: fmt.Sprintf("%s%c", fake.Region(), 'a'+i%3), Tags: tags})
		if err != nil {
			return demoCloud{}, err
		}
		nodes = append(nodes, in.PrivateDNSName)
	}
	url, err := serve(ctx, fake.Handler())
	if err != nil {
		return demoCloud{}, err
	}
	step("serving the fake EC2, ELB and ELBv2 APIs at %s with %d instances of cluster demo", url, n)
	return demoCloud{url: url, module: "modules/aws/module", nodes: nodes,
		// A Classic ELB, the default, and a Network Load Balancer.
		services:       []demoService{{name: "web"}, {name: "web-nlb", annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}}},
		providerConfig: fmt.Sprintf("{region: %s, clusterID: demo, ec2Endpoint: %q, elbEndpoint: %q}", fake.Region(), url, url),
		auth:           fmt.Sprintf("{name: aws, origins: [%q], sigv4: {accessKeyIDKey: access-key-id, secretAccessKeyKey: secret-access-key}}", url),
		secrets:        map[string]string{"access-key-id": awsfake.DefaultAccessKeyID, "secret-access-key": awsfake.DefaultSecretAccessKey},
		describe: func() error {
			fmt.Println("\nIn the fake EC2, ELB and ELBv2 (every request signed by the host with SigV4):")
			for _, lb := range fake.LoadBalancers() {
				fmt.Printf("  classic ELB %s  %s  instances=%s  security groups=%s\n", lb.Name, lb.DNSName,
					strings.Join(lb.Instances, ","), strings.Join(lb.SecurityGroups, ","))
			}
			for _, lb := range fake.NetworkLoadBalancers() {
				fmt.Printf("  network load balancer %s  %s  %s  subnets=%s\n", lb.Name, lb.DNSName, lb.Scheme, strings.Join(lb.Subnets, ","))
			}
			for _, tg := range fake.TargetGroups() {
				var targets []string
				for _, target := range tg.Targets {
					targets = append(targets, fmt.Sprintf("%s:%d", target.ID, target.Port))
				}
				fmt.Printf("  target group %s  %s:%d  targets=%s\n", tg.Name, tg.Protocol, tg.Port, strings.Join(targets, ","))
			}
			rt, _ := fake.RouteTable(table.ID)
			for _, r := range rt.Routes {
				if r.InstanceID != "" {
					fmt.Printf("  route %s via %s (%s)\n", r.DestinationCIDR, r.InstanceID, table.ID)
				}
			}
			return nil
		}}, nil
}

// startDigitalOcean serves the fake DigitalOcean API from this process,
// with one droplet per Node name. DigitalOcean has no routes: the pod
// network is the CNI's business there.
func startDigitalOcean(ctx context.Context, names []string) (demoCloud, error) {
	fake := dofake.New(dofake.Options{Token: token})
	regions := []string{"fra1", "ams3", "lon1"}
	for i, name := range names {
		if _, err := fake.AddDroplet(dofake.Droplet{Name: name, Region: regions[i%len(regions)]}); err != nil {
			return demoCloud{}, err
		}
	}
	url, err := serve(ctx, fake.Handler())
	if err != nil {
		return demoCloud{}, err
	}
	step("serving the fake DigitalOcean API at %s/v2 with %d droplets", url, len(names))
	return demoCloud{url: url, module: "modules/digitalocean/module", nodes: names, auth: bearerAuth(url), secrets: map[string]string{"token": token},
		providerConfig: fmt.Sprintf("{endpoint: %q, tokenCredential: token, region: fra1}", url),
		describe: func() error {
			fmt.Println("\nIn the fake DigitalOcean:")
			for _, lb := range fake.LoadBalancers() {
				fmt.Printf("  load balancer %s  type=%s  region=%s  status=%s  ip=%s  droplets=%s  tags=%s\n", lb.Name, lb.Type, lb.Region.Slug,
					lb.Status, lb.IP, strings.Trim(fmt.Sprint(lb.DropletIDs), "[]"), strings.Join(lb.Tags, ","))
			}
			return nil
		}}, nil
}

// mountModule lays out the gzipped module as a ConfigMap volume looks in a
// pod, "..data" symlink included.
func mountModule(dir, module string, tc wasmbuild.Toolchain) (string, error) {
	path, err := wasmbuild.Build(module, tc)
	if err != nil {
		return "", err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(wasm)
	zw.Close()
	step("module: %d bytes, %d gzipped (a ConfigMap holds at most 1 MiB)", len(wasm), gz.Len())
	mount := filepath.Join(dir, "module")
	data := filepath.Join(mount, "..2026_01_01_00_00_00.000000000")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", err
	}
	file := filepath.Base(filepath.Dir(module)) + ".wasm.gz" // modules/NAME/module
	if err := os.WriteFile(filepath.Join(data, file), gz.Bytes(), 0o644); err != nil {
		return "", err
	}
	os.Symlink(filepath.Base(data), filepath.Join(mount, "..data"))
	os.Symlink("..data/"+file, filepath.Join(mount, file))
	return filepath.Join(mount, file), nil
}

// bearerAuth is the auth entry that sends the demo token to origin.
func bearerAuth(origin string) string {
	return fmt.Sprintf("{name: token, origins: [%q], bearer: {key: token}}", origin)
}

// writeCloudConfig builds the cloud's module (each part's, for a hybrid
// cluster), writes its credentials and the cloud-config in dir, and
// returns the cloud-config's path.
func writeCloudConfig(dir string, cloud demoCloud, tc wasmbuild.Toolchain) (string, error) {
	config := "clusterName: demo\n"
	if cloud.parts == nil {
		body, err := moduleConfig(dir, cloud, tc)
		if err != nil {
			return "", err
		}
		config += body
	} else {
		config += "modules:\n"
		for _, part := range cloud.parts {
			body, err := moduleConfig(filepath.Join(dir, part.name), part, tc)
			if err != nil {
				return "", err
			}
			entry := "name: " + part.name + "\n" + part.routing + body
			config += "- " + strings.ReplaceAll(strings.TrimSuffix(entry, "\n"), "\n", "\n  ") + "\n"
		}
	}
	path := filepath.Join(dir, "cloud-config.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// moduleConfig builds cloud's module and writes its credentials in dir,
// and returns the one-module cloud-config that runs it, without cluster
// name.
func moduleConfig(dir string, cloud demoCloud, tc wasmbuild.Toolchain) (string, error) {
	step("building the %s provider module with %s", filepath.Base(filepath.Dir(cloud.module)), tc) // modules/NAME/module
	modulePath, err := mountModule(dir, cloud.module, tc)
	if err != nil {
		return "", err
	}
	credDir := filepath.Join(dir, "credentials")
	if err := os.MkdirAll(credDir, 0o755); err != nil {
		return "", err
	}
	for name, secret := range cloud.secrets {
		if err := os.WriteFile(filepath.Join(credDir, name), []byte(secret), 0o600); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf(`module: {path: %s, reloadInterval: 10s}
limits: {poolSize: 4, callTimeout: 10s}
http: {allowedOrigins: [%q]}
credentials: {dir: %s, auth: [%s]}
providerConfig: %s
`, modulePath, cloud.url, credDir, cloud.auth, cloud.providerConfig), nil
}

// startCCM starts the CCM with the cloud-config at configPath; routes are
// configured when the cloud-config is of one module (a hybrid cluster's
// clouds cannot route each other's pod CIDRs).
func startCCM(ctx context.Context, bin, kubeconfig, configPath string, routes bool, logPath string) (*exec.Cmd, error) {
	port, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, portStr, _ := net.SplitHostPort(port)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "wasm-cloud-controller-manager"),
		"--cloud-provider=wasm", "--cloud-config="+configPath,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--cluster-name=demo", "--leader-elect=false", "--use-service-account-credentials=false",
		"--allocate-node-cidrs=true", fmt.Sprintf("--configure-cloud-routes=%t", routes), "--cluster-cidr=10.244.0.0/16",
		"--bind-address=127.0.0.1", "--secure-port="+portStr, "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	healthz := "https://127.0.0.1:" + portStr + "/healthz"
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err = waitFor(ctx, 60*time.Second, func() (bool, error) {
		if cmd.ProcessState != nil {
			return false, errors.New("CCM exited")
		}
		resp, err := insecure.Get(healthz)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("CCM not healthy: %w\n%s", err, lastLines(string(log), 30))
	}
	return cmd, nil
}

func converged(ctx context.Context, client kubernetes.Interface, names []string, services []demoService) (bool, error) {
	for _, name := range names {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Spec.ProviderID == "" || slices.ContainsFunc(n.Spec.Taints, isUninitialized) {
			return false, nil
		}
	}
	for _, s := range services {
		svc, err := client.CoreV1().Services("default").Get(ctx, s.name, metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
	}
	return true, nil
}

func isUninitialized(t v1.Taint) bool { return t.Key == uninitialized }

func printState(ctx context.Context, client kubernetes.Interface, cloud demoCloud) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tPROVIDER-ID\tINSTANCE-TYPE\tREGION\tZONE\tADDRESSES\tTAINTS")
	for _, n := range nodes.Items {
		var addrs []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, string(a.Type)+"="+a.Address)
		}
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Spec.ProviderID, n.Labels[v1.LabelInstanceTypeStable],
			n.Labels[v1.LabelTopologyRegion], n.Labels[v1.LabelTopologyZone], strings.Join(addrs, ","), orNone(strings.Join(taints, ",")))
	}
	w.Flush()
	fmt.Println()
	// The class column is the hybrid cluster's: it says which module serves
	// each Service.
	hybrid := cloud.parts != nil
	header := "SERVICE\tTYPE\tCLUSTER-IP\tEXTERNAL-IP\tPORTS\tFINALIZERS"
	if hybrid {
		header = "SERVICE\tTYPE\tCLASS\tCLUSTER-IP\tEXTERNAL-IP\tPORTS\tFINALIZERS"
	}
	fmt.Fprintln(w, header)
	for _, s := range cloud.services {
		svc, err := client.CoreV1().Services("default").Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		}
		typ := string(svc.Spec.Type)
		if hybrid {
			typ += "\t" + orNone(s.class)
		}
		ingress := svc.Status.LoadBalancer.Ingress[0]
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\t%s\n", svc.Namespace, svc.Name, typ, svc.Spec.ClusterIP,
			ingress.IP+ingress.Hostname, strings.Join(ports, ","), strings.Join(svc.Finalizers, ","))
	}
	w.Flush()
	return cloud.describe()
}

// describeSimcloud prints the simulated cloud's load balancers and routes
// from its admin API.
func describeSimcloud(cloudURL string) error {
	resp, err := http.Get(cloudURL + "/admin/state")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var state struct {
		LoadBalancers []simcloud.LoadBalancer `json:"loadBalancers"`
		Routes        []simcloud.Route        `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&state); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("In the simulated cloud:")
	for _, lb := range state.LoadBalancers {
		fmt.Printf("  load balancer %s  ip=%s  targets=%s\n", lb.Name, lb.IP, strings.Join(lb.Targets, ","))
	}
	for _, r := range state.Routes {
		fmt.Printf("  route %s  %s -> %s\n", r.Name, r.DestinationCIDR, r.TargetName)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if ok, err := cond(); ok {
			return nil
		} else if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("timed out after %s (last error: %v)", timeout, last)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
