package ccmcli

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	cloudnodecontroller "k8s.io/cloud-provider/controllers/node"
	cloudnodelifecyclecontroller "k8s.io/cloud-provider/controllers/nodelifecycle"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// startCloudNodeControllers starts upstream's cloud-node controller, with
// upstream's options, once per module that serves Nodes
// (assembly.Cloud.NodeServers), each with workers of its own.
func startCloudNodeControllers(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, controllerContext genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		cc := completed.ComponentConfig
		started := false
		for _, s := range assembled(cloud).NodeServers(completed.SharedInformers.Core().V1().Nodes()) {
			// A client each: its request rate limit is the module's own.
			client, err := completed.ClientBuilder.Client(initContext.ClientName)
			if err != nil {
				return nil, false, err
			}
			c, err := cloudnodecontroller.NewCloudNodeController(s.Nodes, client, s.Cloud, cc.NodeStatusUpdateFrequency.Duration,
				cc.NodeController.ConcurrentNodeSyncs, cc.NodeController.ConcurrentNodeStatusUpdates)
			if err != nil {
				// As upstream: a provider without instances runs no such
				// controller, and the others still run.
				klog.Warningf("failed to start cloud node controller: %s", err)
				continue
			}
			go c.RunWithContext(ctx, controllerContext.ControllerManagerMetrics)
			klog.InfoS("cloud node controller started", "module", s.Module)
			started = true
		}
		return nil, started, nil
	}
}

// startCloudNodeLifecycleControllers is startCloudNodeControllers for
// upstream's cloud-node-lifecycle controller.
func startCloudNodeLifecycleControllers(initContext app.ControllerInitContext, completed *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, controllerContext genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		started := false
		for _, s := range assembled(cloud).NodeServers(completed.SharedInformers.Core().V1().Nodes()) {
			client, err := completed.ClientBuilder.Client(initContext.ClientName)
			if err != nil {
				return nil, false, err
			}
			lc := completed.ComponentConfig.NodeLifecycleController
			c, err := cloudnodelifecyclecontroller.NewCloudNodeLifecycleController(s.Nodes, client, s.Cloud,
				lc.NodeMonitorPeriod.Duration, int(lc.ConcurrentNodeLifecycleSyncs))
			if err != nil {
				klog.Warningf("failed to start cloud node lifecycle controller: %s", err)
				continue
			}
			go c.Run(ctx, controllerContext.ControllerManagerMetrics)
			klog.InfoS("cloud node lifecycle controller started", "module", s.Module)
			started = true
		}
		return nil, started, nil
	}
}
