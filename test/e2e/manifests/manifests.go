// Package manifests reads the kustomize manifests of examples/deploy and
// applies them to a cluster without kubectl, for end-to-end tests that
// install the manager the way its users do.
//
// Only what examples/deploy uses is implemented: a kustomization that lists
// resources, with no transformers or generators. Anything else in it is an
// error rather than silently ignored, so the reader cannot drift from what
// `kubectl apply -k` would do.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Kustomize returns the objects of the resources dir/kustomization.yaml
// lists, in order.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: only resources are supported: %w", dir, err)
	}
	var all []*unstructured.Unstructured
	for _, file := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		objs, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		all = append(all, objs...)
	}
	return all, nil
}

// RenderModule runs dir/render.sh on the module file at path and returns
// the module ConfigMap it prints.
func RenderModule(dir, path string) (*unstructured.Unstructured, error) {
	cmd := exec.Command("sh", filepath.Join(dir, "render.sh"), path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("render.sh %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, fmt.Errorf("render.sh output: %w", err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "ConfigMap" {
		return nil, fmt.Errorf("render.sh printed %d objects, want one ConfigMap", len(objs))
	}
	return objs[0], nil
}

// Decode splits a YAML stream into objects, strictly: duplicate keys are
// errors. Documents holding only comments are skipped.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, err
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// Find returns the object of that kind and name among all, or nil.
func Find(all []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, obj := range all {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	return nil
}

// Edit converts obj into its Go type T (unknown fields are errors), lets
// edit change it, and stores the result back in obj: the tests change the
// manifests only where they must, in typed code.
func Edit[T runtime.Object](obj *unstructured.Unstructured, edit func(T)) error {
	typed, err := scheme.Scheme.New(obj.GroupVersionKind())
	if err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typed, true); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	t, ok := typed.(T)
	if !ok {
		return fmt.Errorf("%s %s is a %T", obj.GetKind(), obj.GetName(), typed)
	}
	edit(t)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	if err != nil {
		return err
	}
	obj.Object = content
	obj.SetGroupVersionKind(typed.GetObjectKind().GroupVersionKind())
	return nil
}

// fieldManager owns what Apply writes.
const fieldManager = "wasmccm-e2e"

// Apply applies objs server-side, in order, as `kubectl apply
// --server-side` does.
func Apply(ctx context.Context, cfg *rest.Config, objs ...*unstructured.Unstructured) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		_, err = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
