package provider

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
)

// nodeRef names the Node an answer is about. node is nil, and uid empty,
// when the answer came by name or provider ID and the Node cache did not
// know it.
type nodeRef struct {
	name string
	uid  types.UID
	node *v1.Node
}

func refOf(n *v1.Node) nodeRef { return nodeRef{name: n.Name, uid: n.UID, node: n} }

// admitDeletion passes a "gone" answer about node through the deletion
// budget (runtime/deletion): nil lets it through, an error replaces it.
// Past the budget, an answer the control probe and the previous module
// corroborate is admitted up to the ceiling.
func (c *Cloud) admitDeletion(ctx context.Context, node nodeRef) error {
	if c.budget == nil {
		return nil
	}
	event, err := c.budget.Guard(node.name, c.nodeCount, func() string { return c.corroborate(ctx, node) })
	if event != "" {
		c.events.emitNode(node, events.NodeDeletionDeferred, event)
		c.events.emit(events.NodeDeletionDeferred, event)
	}
	return err
}

// corroborate looks for evidence that a "gone" answer about node is not
// one of the answers the budget guards against, and returns why it found
// none, or "" when the answer is corroborated: during a probation the
// previous module must answer "gone" too, and the module in service must
// pass the control probe.
func (c *Cloud) corroborate(ctx context.Context, node nodeRef) string {
	if node.node == nil {
		return "the Node is not in the Node cache"
	}
	if previous, digest := c.modules.Previous(); previous != nil {
		export, in, out := c.existenceQuestion(node.node)
		err := previous.Call(ctx, export, in, out)
		if !lifecycle.Gone(export, out, err) {
			return fmt.Sprintf("the previous module %s, kept for the rollback window, does not answer that the instance is gone", digest)
		}
	}
	backend := c.modules.InService()
	return c.control.Verdict(backend, c.listNodes(), node.name, func(n *v1.Node) (bool, error) {
		export, in, out := c.existenceQuestion(n)
		if err := (*backend).Call(ctx, export, in, out); err != nil {
			return false, err
		}
		return lifecycle.Gone(export, out, nil), nil
	})
}

// existenceQuestion is the call the lifecycle controller would make to
// decide whether node is gone.
func (c *Cloud) existenceQuestion(node *v1.Node) (string, abi.Message, abi.Message) {
	switch {
	case c.supports(abi.CapabilityInstancesV2):
		n := toNode(node)
		return abi.ExportInstanceExists, &n, new(abi.Bool)
	case node.Spec.ProviderID != "":
		id := abi.String(node.Spec.ProviderID)
		return abi.ExportInstanceExistsByProviderID, &id, new(abi.Bool)
	}
	name := abi.String(node.Name)
	return abi.ExportInstanceID, &name, new(abi.String)
}

// nodeCache is the Node informer the controllers share. Until it has
// synced the Node count reads as 0, so only the budget's absolute count
// applies: never more than configured, and the percentage starts to count
// once the cache is complete.
type nodeCache struct {
	lister corelisters.NodeLister
	synced cache.InformerSynced
}

// SetInformers implements cloudprovider.InformerUser: the budget's
// percentage needs the Node count, and answers by provider ID need the
// Node's name.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	informer := factory.Core().V1().Nodes()
	c.nodes.Store(&nodeCache{lister: informer.Lister(), synced: informer.Informer().HasSynced})
}

// listNodes returns the module's cached Nodes (Options.Owns), or nil
// before the cache synced.
func (c *Cloud) listNodes() []*v1.Node {
	nc := c.nodes.Load()
	if nc == nil || !nc.synced() {
		return nil
	}
	nodes, err := nc.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	if c.owns != nil {
		nodes = slices.DeleteFunc(nodes, func(n *v1.Node) bool { return !c.owns(n) })
	}
	return nodes
}

func (c *Cloud) nodeCount() int { return len(c.listNodes()) }

// nodeByName and nodeByProviderID name the Node an answer is about, with
// its UID when the cache has it, for Events.
func (c *Cloud) nodeByName(name string) nodeRef {
	if nc := c.nodes.Load(); nc != nil {
		if n, err := nc.lister.Get(name); err == nil {
			return refOf(n)
		}
	}
	return nodeRef{name: name}
}

func (c *Cloud) nodeByProviderID(providerID string) nodeRef {
	for _, n := range c.listNodes() {
		if n.Spec.ProviderID == providerID {
			return refOf(n)
		}
	}
	return nodeRef{name: providerID}
}
