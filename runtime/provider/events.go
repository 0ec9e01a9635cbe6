package provider

import (
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/events"
)

// moduleEvents records Events about the module on the CCM's own Pod, named
// by the POD_NAMESPACE and POD_NAME environment variables (the Deployment
// sets them from the downward API): operators look there when a rollout of
// a new module does not take effect. Events about one Node (a deferred
// deletion) go on the Node as well, where `kubectl describe node` shows
// them. Events of the start, before the CCM has a client, are kept until
// start gives it one.
type moduleEvents struct {
	mu       sync.Mutex
	recorder record.EventRecorder
	// pod is nil when the Pod's name is not known.
	pod     *v1.ObjectReference
	pending []pendingEvent
	started bool
	// prefix names the module in every message when the CCM serves
	// several.
	prefix string
}

type pendingEvent struct {
	reason  events.Reason
	message string
}

// maxPendingEvents bounds what a start can report before Initialize.
const maxPendingEvents = 16

// start gives the Events a client and records those kept so far.
func (e *moduleEvents) start(clientBuilder cloudprovider.ControllerClientBuilder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = true
	if clientBuilder == nil {
		return
	}
	client, err := clientBuilder.Client("wasm-cloud-provider")
	if err != nil {
		klog.ErrorS(err, "module events disabled")
		return
	}
	e.recorder = events.NewRecorder(client)
	if namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"); namespace != "" && name != "" {
		e.pod = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name}
	} else {
		klog.InfoS("module events on the CCM's Pod disabled: POD_NAMESPACE and POD_NAME are not both set")
	}
	for _, p := range e.pending {
		e.emitLocked(p.reason, p.message)
	}
	e.pending = nil
}

func (e *moduleEvents) emit(reason events.Reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	message = e.prefix + message
	if !e.started {
		if len(e.pending) < maxPendingEvents {
			e.pending = append(e.pending, pendingEvent{reason, message})
		}
		return
	}
	e.emitLocked(reason, message)
}

func (e *moduleEvents) emitLocked(reason events.Reason, message string) {
	if e.pod != nil {
		events.Record(e.recorder, e.pod, reason, message)
	}
}

// emitNode records an Event on node, when the Node cache identified it.
func (e *moduleEvents) emitNode(node nodeRef, reason events.Reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.recorder != nil && node.uid != "" {
		ref := &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.name, UID: node.uid}
		events.Record(e.recorder, ref, reason, e.prefix+message)
	}
}
