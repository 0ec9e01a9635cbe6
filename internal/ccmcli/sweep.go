package ccmcli

import (
	"context"
	"maps"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/assembly"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// orphanSweepController is the sweep's name in --controllers.
const orphanSweepController = "orphan-load-balancer-sweep"

// controllers are the upstream controllers, the Node and service
// controllers started once per module of a CCM of several (nodes.go,
// services.go), and the orphan load balancer sweep, which runs like them:
// on the leader only, over the shared informers.
func controllers() map[string]app.ControllerInitFuncConstructor {
	c := maps.Clone(app.DefaultInitFuncConstructors)
	c[names.CloudNodeController] = app.ControllerInitFuncConstructor{
		InitContext: c[names.CloudNodeController].InitContext,
		Constructor: startCloudNodeControllers,
	}
	c[names.CloudNodeLifecycleController] = app.ControllerInitFuncConstructor{
		InitContext: c[names.CloudNodeLifecycleController].InitContext,
		Constructor: startCloudNodeLifecycleControllers,
	}
	c[names.ServiceLBController] = app.ControllerInitFuncConstructor{
		InitContext: c[names.ServiceLBController].InitContext,
		Constructor: startServiceControllers,
	}
	c[orphanSweepController] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "orphan-load-balancer-sweep"},
		Constructor: startOrphanSweep,
	}
	return c
}

// startOrphanSweep starts the sweep of each module as it starts.
func startOrphanSweep(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		clusterName := completed.ComponentConfig.KubeCloudShared.ClusterName
		client, err := completed.ClientBuilder.Client(initContext.ClientName)
		if err != nil {
			return nil, false, err
		}
		// Got now, so that the shared informer factory starts it.
		services := completed.SharedInformers.Core().V1().Services()
		lister, synced := services.Lister(), services.Informer().HasSynced
		var (
			once     sync.Once
			recorder record.EventRecorder
			pod      *v1.ObjectReference
		)
		assembled(cloud).EachStarted(func(m assembly.Served) {
			c := m.Cloud
			if _, ok := c.LoadBalancer(); !ok {
				klog.InfoS("orphan load balancer sweep not started: the module has no LoadBalancer capability", "module", c.Name())
				return
			}
			if why := sweep.Refusal(c.OrphanSweep(), clusterName); why != "" {
				klog.InfoS("orphan load balancer sweep not started", "module", c.Name(), "reason", why)
				return
			}
			once.Do(func() {
				broadcaster := record.NewBroadcaster(record.WithContext(ctx))
				broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
				recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "wasm-cloud-controller-manager"})
				if namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"); namespace != "" && name != "" {
					pod = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name}
				}
			})
			scope := sweep.Scope{Module: m.Name, Keeps: m.Keeps}
			go sweep.New(c.OrphanSweep(), c, scope, clusterName, lister, synced, recorder, pod).Run(ctx)
		})
		return nil, true, nil
	}
}
