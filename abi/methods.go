package abi

// Method describes one method export: its cloudprovider method name and the
// message types it takes and answers (Output is nil when it answers none).
type Method struct {
	Name   string
	Export string
	Input  func() Message
	Output func() Message
}

func newNode() Message                { return &Node{} }
func newString() Message              { return new(String) }
func newBool() Message                { return new(Bool) }
func newEmpty() Message               { return &Empty{} }
func newLoadBalancerRequest() Message { return &LoadBalancerRequest{} }
func newRouteRequest() Message        { return &RouteRequest{} }
func newZone() Message                { return &Zone{} }

// Methods lists every method export, init included, in a stable order.
var Methods = []Method{
	{"Init", ExportInit, func() Message { return &InitRequest{} }, nil},
	{"InstanceExists", ExportInstanceExists, newNode, newBool},
	{"InstanceShutdown", ExportInstanceShutdown, newNode, newBool},
	{"InstanceMetadata", ExportInstanceMetadata, newNode, func() Message { return &InstanceMetadata{} }},
	{"NodeAddresses", ExportNodeAddresses, newString, func() Message { return &NodeAddresses{} }},
	{"NodeAddressesByProviderID", ExportNodeAddressesByProviderID, newString, func() Message { return &NodeAddresses{} }},
	{"InstanceID", ExportInstanceID, newString, newString},
	{"InstanceType", ExportInstanceType, newString, newString},
	{"InstanceTypeByProviderID", ExportInstanceTypeByProviderID, newString, newString},
	{"InstanceExistsByProviderID", ExportInstanceExistsByProviderID, newString, newBool},
	{"InstanceShutdownByProviderID", ExportInstanceShutdownByProviderID, newString, newBool},
	{"CurrentNodeName", ExportCurrentNodeName, newString, newString},
	{"GetLoadBalancer", ExportGetLoadBalancer, newLoadBalancerRequest, func() Message { return &GetLoadBalancerResult{} }},
	{"GetLoadBalancerName", ExportGetLoadBalancerName, newLoadBalancerRequest, newString},
	{"EnsureLoadBalancer", ExportEnsureLoadBalancer, newLoadBalancerRequest, func() Message { return &LoadBalancerStatus{} }},
	{"UpdateLoadBalancer", ExportUpdateLoadBalancer, newLoadBalancerRequest, nil},
	{"EnsureLoadBalancerDeleted", ExportEnsureLoadBalancerDeleted, newLoadBalancerRequest, nil},
	{"ListRoutes", ExportListRoutes, newRouteRequest, func() Message { return &Routes{} }},
	{"CreateRoute", ExportCreateRoute, newRouteRequest, nil},
	{"DeleteRoute", ExportDeleteRoute, newRouteRequest, nil},
	{"GetZone", ExportGetZone, newEmpty, newZone},
	{"GetZoneByProviderID", ExportGetZoneByProviderID, newString, newZone},
	{"GetZoneByNodeName", ExportGetZoneByNodeName, newString, newZone},
	{"ListClusters", ExportListClusters, newEmpty, func() Message { return &Strings{} }},
	{"Master", ExportClusterMaster, newString, newString},
	{"ListLoadBalancers", ExportListLoadBalancers, newString, func() Message { return &OwnedLoadBalancers{} }},
	{"SetLoadBalancerNodes", ExportSetLoadBalancerNodes, func() Message { return &LoadBalancerNodes{} }, nil},
}

// LookupMethod finds a method by its name or its export name.
func LookupMethod(name string) (Method, bool) {
	for _, m := range Methods {
		if m.Name == name || m.Export == name {
			return m, true
		}
	}
	return Method{}, false
}
