package ccmcli

import (
	"context"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/multimodule"
)

// startServiceControllers starts the upstream service controller: one
// over the provider for a CCM of one module, or one per module that
// serves load balancers for a CCM of several, each over a Service
// informer showing it only the Services routed to its module
// (multimodule.Routing.ServiceView). Finalizer, status, Events, node sync
// and retries are thus the upstream controller's for every class.
func startServiceControllers(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	multi, ok := cloud.(*multimodule.Cloud)
	if !ok {
		return app.StartServiceControllerWrapper(initContext, completed, cloud)
	}
	return func(ctx context.Context, controllerContext genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		client, err := completed.ClientBuilder.Client(initContext.ClientName)
		if err != nil {
			return nil, false, err
		}
		workers := int(completed.ComponentConfig.ServiceController.ConcurrentServiceSyncs)
		started := false
		for name, lbCloud := range multi.LoadBalancers() {
			factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(multi.Routing().ServiceView(name)))
			c, err := servicecontroller.New(lbCloud, client, factory.Core().V1().Services(),
				completed.SharedInformers.Core().V1().Nodes(), completed.ComponentConfig.KubeCloudShared.ClusterName, utilfeature.DefaultFeatureGate)
			if err != nil {
				return nil, false, err
			}
			factory.Start(ctx.Done())
			go c.Run(ctx, workers, controllerContext.ControllerManagerMetrics)
			klog.InfoS("service controller started", "module", name)
			started = true
		}
		return nil, started, nil
	}
}
