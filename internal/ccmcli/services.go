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
)

// startServiceControllers starts the upstream service controller once per
// module that serves load balancers (assembly.Cloud.LoadBalancerServers),
// each over the Services routed to its module. Finalizer, status, Events,
// node sync and retries are thus the upstream controller's for every
// class.
func startServiceControllers(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, controllerContext genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		client, err := completed.ClientBuilder.Client(initContext.ClientName)
		if err != nil {
			return nil, false, err
		}
		workers := int(completed.ComponentConfig.ServiceController.ConcurrentServiceSyncs)
		started := false
		for _, s := range assembled(cloud).LoadBalancerServers() {
			services := completed.SharedInformers.Core().V1().Services()
			var own informers.SharedInformerFactory
			if s.View != nil {
				own = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(s.View))
				services = own.Core().V1().Services()
			}
			c, err := servicecontroller.New(s.Cloud, client, services,
				completed.SharedInformers.Core().V1().Nodes(), completed.ComponentConfig.KubeCloudShared.ClusterName, utilfeature.DefaultFeatureGate)
			if err != nil {
				// As upstream: a provider without load balancers runs no
				// such controller, and the others still run.
				klog.ErrorS(err, "failed to start service controller", "module", s.Module)
				continue
			}
			if own != nil {
				own.Start(ctx.Done())
			}
			go c.Run(ctx, workers, controllerContext.ControllerManagerMetrics)
			klog.InfoS("service controller started", "module", s.Module)
			started = true
		}
		return nil, started, nil
	}
}
