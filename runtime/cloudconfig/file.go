package cloudconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// File is the --cloud-config file: the modules the CCM serves. A file
// with a top-level `modules` list names each module and what it serves
// (docs/hybrid.md). Any other file is one module's Config, read as a list
// of one unnamed module (Sole) that serves every Node, every Service
// without a class and the routes.
type File struct {
	// ClusterName is every module's cluster name. Default "kubernetes".
	ClusterName string `json:"clusterName,omitempty"`
	// Modules are the modules served, in the order their Node rules are
	// tried.
	Modules []Entry `json:"modules"`
	// Routes names the module that programs the pod-network routes of
	// every Node; empty: no module does (--configure-cloud-routes=false).
	Routes string `json:"routes,omitempty"`

	sole bool
}

// Entry is one module of a File: a module's Config (module, limits, http,
// credentials, safety, orphanSweep, providerConfig), with a name and what
// it serves.
type Entry struct {
	// Name labels the module's metrics, prefixes its Events and names its
	// last-known-good record; a DNS label, unique in the cloud-config.
	Name string `json:"name"`
	// Nodes says which Nodes the module serves; none when empty.
	Nodes NodeRule `json:"nodes,omitempty"`
	// LoadBalancers says which Services' load balancers the module makes.
	LoadBalancers LoadBalancerRule `json:"loadBalancers,omitempty"`

	Config
}

// NodeRule says which Nodes a module serves. A Node with a provider ID is
// the module's whose ProviderIDPrefix starts it, whatever else matches;
// before it has one, it is the first module's (in the cloud-config's
// order) whose Selector and NamePattern both match it, or else the
// Default module's. A Node no module serves is left alone.
type NodeRule struct {
	// ProviderIDPrefix is the start of the provider IDs the module gives
	// its Nodes, such as "hcloud://"; required to serve Nodes. A module
	// answering a provider ID outside it is refused.
	ProviderIDPrefix string `json:"providerIDPrefix,omitempty"`
	// Selector matches the labels of a Node without a provider ID, such
	// as the labels the kubelet was started with.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// NamePattern matches the name of a Node without a provider ID, as
	// path.Match does ("sim-*").
	NamePattern string `json:"namePattern,omitempty"`
	// Default serves the Nodes without a provider ID that no module's
	// Selector or NamePattern matches; at most one module.
	Default bool `json:"default,omitempty"`
}

// Serves reports whether the rule gives the module any Node.
func (r NodeRule) Serves() bool { return r.ProviderIDPrefix != "" }

// LoadBalancerRule says which Services' load balancers a module makes.
type LoadBalancerRule struct {
	// Classes are the spec.loadBalancerClass values the module serves; a
	// class is served by at most one module.
	Classes []string `json:"classes,omitempty"`
	// Default serves the Services without a class; at most one module.
	// Without a default module, such Services get no load balancer here.
	Default bool `json:"default,omitempty"`
	// Targets are the Nodes given to the module's load balancers: "own"
	// (the Nodes it serves; the default for a module that serves Nodes)
	// or "all" (every Node; the default for one that serves none, such as
	// a load balancer appliance).
	Targets string `json:"targets,omitempty"`
}

// Target values of LoadBalancerRule.
const (
	TargetsOwn = "own"
	TargetsAll = "all"
)

// Serves reports whether the rule gives the module any Service.
func (r LoadBalancerRule) Serves() bool { return r.Default || len(r.Classes) > 0 }

// maxModules bounds the modules of one CCM: each has its own instances,
// shared state and informers.
const maxModules = 16

// Parse reads and validates a cloud-config file.
func Parse(r io.Reader) (*File, error) {
	if r == nil {
		return nil, errors.New("provider wasm needs --cloud-config")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading cloud-config: %w", err)
	}
	var f File
	if hasModules(data) {
		err = unmarshal(data, &f)
	} else {
		f.sole = true
		f.Modules = make([]Entry, 1)
		err = unmarshal(data, &f.Modules[0].Config)
		f.ClusterName = f.Modules[0].ClusterName
	}
	if err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	return &f, nil
}

// ReadFile parses the cloud-config at path.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening cloud-config: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// hasModules reports whether a cloud-config is a list of modules: it has
// a top-level `modules` key, even an empty one, whose error then says so.
func hasModules(data []byte) bool {
	var keys map[string]json.RawMessage
	if yaml.Unmarshal(data, &keys) != nil {
		return false
	}
	_, ok := keys["modules"]
	return ok
}

// unmarshal decodes YAML refusing unknown fields, so that a typo never
// silently drops a limit or a grant.
func unmarshal(data []byte, into any) error {
	err := yaml.UnmarshalStrict(data, into)
	if err != nil && strings.Contains(err.Error(), `unknown field "granted"`) {
		err = fmt.Errorf("%w: credentials.granted was replaced by credentials.auth, which has the host apply a credential to the module's requests, and credentials.readable, which lets the module read it", err)
	}
	return err
}

// Sole reports whether the file is one module's Config: its one module
// is unnamed and serves every Node, every Service without a class and
// the routes.
func (f *File) Sole() bool { return f.sole }

// Pick returns the Config of the module named name; "" picks the only
// module of a file that has one.
func (f *File) Pick(name string) (*Config, error) {
	var names []string
	for i, m := range f.Modules {
		if m.Name == name || name == "" && len(f.Modules) == 1 {
			return &f.Modules[i].Config, nil
		}
		names = append(names, m.Name)
	}
	if f.sole {
		return nil, fmt.Errorf("the cloud-config is one unnamed module's; name none (got %q)", name)
	}
	if name == "" {
		return nil, fmt.Errorf("the cloud-config serves several modules; name one of %s", strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("the cloud-config has no module %q; it has %s", name, strings.Join(names, ", "))
}

// validate checks the routing rules and every module's own cloud-config,
// and gives each module the cluster name and, unless set, a last-known-good
// record of its own.
func (f *File) validate() error {
	if f.sole {
		return f.Modules[0].Validate()
	}
	var errs []error
	if len(f.Modules) == 0 || len(f.Modules) > maxModules {
		errs = append(errs, fmt.Errorf("modules: %d modules, want 1..%d", len(f.Modules), maxModules))
	}
	clusterName := f.ClusterName
	if clusterName == "" {
		clusterName = DefaultClusterName
	}
	names := map[string]bool{}
	classes := map[string]string{}
	var nodeDefault, lbDefault []string
	records := map[string]string{}
	for i := range f.Modules {
		m := &f.Modules[i]
		at := fmt.Sprintf("modules[%d] (%s)", i, m.Name)
		if problems := validation.IsDNS1123Label(m.Name); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("modules[%d].name %q: %s", i, m.Name, strings.Join(problems, "; ")))
		}
		if names[m.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is used twice", at))
		}
		names[m.Name] = true
		switch m.ClusterName {
		case "", clusterName:
			m.ClusterName = clusterName
		default:
			errs = append(errs, fmt.Errorf("%s: clusterName %q differs from the cloud-config's %q", at, m.ClusterName, clusterName))
		}
		if m.Module.LastKnownGood.Name == "" {
			m.Module.LastKnownGood.Name = "wasmccm-last-known-good-" + m.Name
		}
		if other, dup := records[m.Module.LastKnownGood.Name]; dup && !m.Module.LastKnownGood.Disabled {
			errs = append(errs, fmt.Errorf("%s: module.lastKnownGood.name %q is %s's too", at, m.Module.LastKnownGood.Name, other))
		}
		records[m.Module.LastKnownGood.Name] = m.Name
		if err := m.Config.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
		errs = append(errs, m.Nodes.validate(at))
		if m.Nodes.Default {
			nodeDefault = append(nodeDefault, m.Name)
		}
		if m.LoadBalancers.Default {
			lbDefault = append(lbDefault, m.Name)
		}
		for _, class := range m.LoadBalancers.Classes {
			if other, dup := classes[class]; dup {
				errs = append(errs, fmt.Errorf("%s: loadBalancers.classes: %q is served by %s too", at, class, other))
			}
			classes[class] = m.Name
		}
		switch m.LoadBalancers.Targets {
		case "", TargetsOwn, TargetsAll:
		default:
			errs = append(errs, fmt.Errorf("%s: loadBalancers.targets %q is neither %q nor %q", at, m.LoadBalancers.Targets, TargetsOwn, TargetsAll))
		}
		if !m.Nodes.Serves() && !m.LoadBalancers.Serves() && f.Routes != m.Name {
			errs = append(errs, fmt.Errorf("%s: serves no Nodes (nodes.providerIDPrefix), no load balancers (loadBalancers) and no routes", at))
		}
	}
	if len(nodeDefault) > 1 {
		errs = append(errs, fmt.Errorf("nodes.default is set on %d modules (%s): at most one", len(nodeDefault), strings.Join(nodeDefault, ", ")))
	}
	if len(lbDefault) > 1 {
		errs = append(errs, fmt.Errorf("loadBalancers.default is set on %d modules (%s): at most one", len(lbDefault), strings.Join(lbDefault, ", ")))
	}
	errs = append(errs, overlappingPrefixes(f.Modules))
	if f.Routes != "" && !names[f.Routes] {
		errs = append(errs, fmt.Errorf("routes: no module is named %q", f.Routes))
	}
	return errors.Join(errs...)
}

func (r NodeRule) validate(at string) error {
	var errs []error
	if !r.Serves() && (r.Selector != nil || r.NamePattern != "" || r.Default) {
		errs = append(errs, fmt.Errorf("%s: nodes.selector, nodes.namePattern and nodes.default need nodes.providerIDPrefix, which names the module's Nodes once they have a provider ID", at))
	}
	if r.ProviderIDPrefix != "" && !strings.Contains(r.ProviderIDPrefix, "://") {
		errs = append(errs, fmt.Errorf("%s: nodes.providerIDPrefix %q lacks the scheme's \"://\"", at, r.ProviderIDPrefix))
	}
	if r.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(r.Selector); err != nil {
			errs = append(errs, fmt.Errorf("%s: nodes.selector: %w", at, err))
		}
	}
	if r.NamePattern != "" {
		if _, err := path.Match(r.NamePattern, ""); err != nil {
			errs = append(errs, fmt.Errorf("%s: nodes.namePattern %q: %w", at, r.NamePattern, err))
		}
	}
	return errors.Join(errs...)
}

// overlappingPrefixes refuses two modules whose provider ID prefixes
// could both claim one Node.
func overlappingPrefixes(modules []Entry) error {
	var errs []error
	for i, a := range modules {
		for _, b := range modules[i+1:] {
			pa, pb := a.Nodes.ProviderIDPrefix, b.Nodes.ProviderIDPrefix
			if pa == "" || pb == "" {
				continue
			}
			if strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa) {
				errs = append(errs, fmt.Errorf("modules %s and %s: nodes.providerIDPrefix %q and %q could both claim a Node", a.Name, b.Name, pa, pb))
			}
		}
	}
	return errors.Join(errs...)
}

// Entry returns the module named name, nil when there is none.
func (f *File) Entry(name string) *Entry {
	i := slices.IndexFunc(f.Modules, func(m Entry) bool { return m.Name == name })
	if i < 0 {
		return nil
	}
	return &f.Modules[i]
}
