package provider

import (
	"context"
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmccm/wasmccm/abi"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// lbModule assembles a module with the LoadBalancer capability whose
// methods answer OK without payload, GetLoadBalancerName answering name
// (an error when empty), and, when list is not nil, the list export
// answering it.
func lbModule(name string, list abi.OwnedLoadBalancers) []byte {
	params, results := []byte{wt.I32, wt.I32}, []byte{wt.I64}
	answer := func(at uint32, b []byte) []byte {
		return wt.Seq(wt.StoreBytes(int32(at), b), wt.I64Const(int64(abi.PackResult(at, uint32(len(b))))))
	}
	ok := answer(2048, abi.EncodeResult(nil, abi.Outcome{}, nil))
	m := wt.Module{MemoryPages: 1, Funcs: []wt.Func{
		{Export: abi.ExportABIVersion, Results: []byte{wt.I32}, Body: wt.I32Const(abi.Version)},
		{Export: abi.ExportAlloc, Params: []byte{wt.I32}, Results: []byte{wt.I32}, Body: wt.I32Const(1024)},
		{Export: abi.ExportInit, Params: params, Results: results, Body: ok},
	}}
	for _, c := range abi.Capabilities {
		if c.Capability != abi.CapabilityLoadBalancer {
			continue
		}
		for _, export := range c.Exports {
			body := ok
			if export == abi.ExportGetLoadBalancerName {
				s := abi.String(name)
				o := abi.Outcome{}
				if name == "" {
					o = abi.Outcome{Status: abi.StatusError, Message: "no name"}
				}
				body = answer(4096, abi.EncodeResult(nil, o, &s))
			}
			m.Funcs = append(m.Funcs, wt.Func{Export: export, Params: params, Results: results, Body: body})
		}
	}
	if list != nil {
		m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportListLoadBalancers, Params: params, Results: results,
			Body: answer(8192, abi.EncodeResult(nil, abi.Outcome{}, &list))})
	}
	return m.Bytes()
}

func TestListOwnedLoadBalancers(t *testing.T) {
	ctx := context.Background()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u-1"}}

	old := newCloud(t, lbModule("lb-web", nil), nil)
	if _, _, err := old.ListOwnedLoadBalancers(ctx, "c"); !errors.Is(err, sweep.ErrUnsupported) {
		t.Fatalf("a module without the export: %v, want sweep.ErrUnsupported", err)
	}
	if name, err := old.LoadBalancerNameOf(ctx, "c", svc); name != "lb-web" || err != nil {
		t.Fatalf("LoadBalancerNameOf = %q, %v", name, err)
	}

	want := abi.OwnedLoadBalancers{{Name: "lb-gone", ID: "7", ClusterName: "c", ServiceUID: "u-gone", ServiceNamespace: "default", ServiceName: "gone"}}
	c := newCloud(t, lbModule("", want), nil)
	got, module, err := c.ListOwnedLoadBalancers(ctx, "c")
	if err != nil || !reflect.DeepEqual(abi.OwnedLoadBalancers(got), want) || module == nil {
		t.Fatalf("ListOwnedLoadBalancers = %+v, %v, %v", got, module, err)
	}
	if _, again, _ := c.ListOwnedLoadBalancers(ctx, "c"); again != module {
		t.Fatal("the same module answered as another")
	}
	// GetLoadBalancerName falls back to the default name; the sweep's
	// lookup fails instead.
	if name, err := c.LoadBalancerNameOf(ctx, "c", svc); err == nil {
		t.Fatalf("LoadBalancerNameOf of a failing module = %q, nil", name)
	}
	if err := c.DeleteOwnedLoadBalancer(ctx, "c", svc); err != nil {
		t.Fatal(err)
	}
}
