package provider

import (
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Event reasons about the module itself.
const (
	eventModuleReloaded = "ModuleReloaded"
	eventModuleRejected = "ModuleRejected"
)

// moduleEvents records Events about the module on the CCM's own Pod, named
// by the POD_NAMESPACE and POD_NAME environment variables (the Deployment
// sets them from the downward API): operators look there when a rollout of
// a new module does not take effect.
type moduleEvents struct {
	recorder record.EventRecorder
	pod      *v1.ObjectReference
}

func newModuleEvents(clientBuilder cloudprovider.ControllerClientBuilder) *moduleEvents {
	namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if clientBuilder == nil || namespace == "" || name == "" {
		klog.InfoS("module events disabled: POD_NAMESPACE and POD_NAME are not both set")
		return nil
	}
	client, err := clientBuilder.Client("wasm-cloud-provider")
	if err != nil {
		klog.ErrorS(err, "module events disabled")
		return nil
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &moduleEvents{
		recorder: broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "wasm-cloud-controller-manager"}),
		pod:      &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name},
	}
}

func (e *moduleEvents) emit(eventType, reason, message string) {
	if e != nil {
		e.recorder.Event(e.pod, eventType, reason, message)
	}
}
