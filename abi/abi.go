// Package abi defines wasmccm's host/guest contract, version 1: the names
// and signatures of the functions a provider module exports and imports, the
// status codes, and the wire types exchanged through guest memory.
//
// The human-readable specification is abi/README.md; this package is its
// executable form, shared by the host (runtime/host) and the guest SDK
// (modules/sdk). It imports only the standard library so that TinyGo and
// GOOS=wasip1 builds stay small.
package abi

import "time"

// Version is the ABI version this package implements. A module reports the
// version it was built for through ExportABIVersion; the host refuses any
// other, because wire layouts are not negotiated.
const Version = 1

// Revision counts backward-compatible additions to Version: new host
// imports, which a module that does not import them never sees, and new
// optional exports (OptionalExports, ExportSetDeadline), which a host
// calls only when the module exports them. A module that imports a
// function its host lacks is refused at load with the function's name,
// and an older host ignores an export it does not know, so a module needs
// no way to ask for the revision.
//
// Revision 2 added the shared state imports (ImportStateGet,
// ImportStateSet, ImportStateDelete), and reserved the request headers
// starting with HeaderPrefix for host-side authentication. Revision 3
// added the optional export ExportListLoadBalancers. Revision 4 added the
// optional export ExportSetDeadline. Revision 5 added the reserved request
// header HeaderReadOnly. Revision 6 added the optional export
// ExportSetLoadBalancerNodes.
const Revision = 6

// Core exports every module has.
const (
	// ExportABIVersion is () -> i32, returning Version.
	ExportABIVersion = "wasmccm_abi_version"
	// ExportAlloc is (size i32) -> i32: a pointer to at least size bytes of
	// guest memory, owned by the guest and valid until the next export call.
	// The host writes each call's input there.
	ExportAlloc = "wasmccm_alloc"
	// ExportInit is a method export taking an InitRequest and returning an
	// empty result. It runs once per instance before any other method; an
	// error result rejects the provider config.
	ExportInit = "wasmccm_init"
)

// ExportSetDeadline (revision 4) is optional, and not a method: (time_left
// i64) -> (). A host that knows it calls it right before each method
// export, init included, with the nanoseconds left before that call's
// deadline (CallTimeout, or the caller's deadline if earlier), never
// negative. A module that polls an asynchronous cloud action polls while
// time is left, then answers StatusRetryAfter rather than being stopped
// at the deadline. It is the time left rather than an instant so that it
// does not depend on the guest's clock agreeing with the host's. A method
// call not preceded by it (an older host) has no known deadline.
const ExportSetDeadline = "wasmccm_set_deadline"

// Method exports all have the signature (ptr i32, len i32) -> i64: the input
// message is at guest memory [ptr, ptr+len) and the returned value packs the
// result's pointer in the high 32 bits and its length in the low 32 bits.
// The result stays valid until the next export call on that instance.
const (
	ExportInstanceExists   = "wasmccm_instance_exists"
	ExportInstanceShutdown = "wasmccm_instance_shutdown"
	ExportInstanceMetadata = "wasmccm_instance_metadata"

	ExportNodeAddresses                = "wasmccm_node_addresses"
	ExportNodeAddressesByProviderID    = "wasmccm_node_addresses_by_provider_id"
	ExportInstanceID                   = "wasmccm_instance_id"
	ExportInstanceType                 = "wasmccm_instance_type"
	ExportInstanceTypeByProviderID     = "wasmccm_instance_type_by_provider_id"
	ExportInstanceExistsByProviderID   = "wasmccm_instance_exists_by_provider_id"
	ExportInstanceShutdownByProviderID = "wasmccm_instance_shutdown_by_provider_id"
	ExportCurrentNodeName              = "wasmccm_current_node_name"

	ExportGetLoadBalancer           = "wasmccm_get_load_balancer"
	ExportGetLoadBalancerName       = "wasmccm_get_load_balancer_name"
	ExportEnsureLoadBalancer        = "wasmccm_ensure_load_balancer"
	ExportUpdateLoadBalancer        = "wasmccm_update_load_balancer"
	ExportEnsureLoadBalancerDeleted = "wasmccm_ensure_load_balancer_deleted"

	ExportListRoutes  = "wasmccm_list_routes"
	ExportCreateRoute = "wasmccm_create_route"
	ExportDeleteRoute = "wasmccm_delete_route"

	ExportGetZone             = "wasmccm_get_zone"
	ExportGetZoneByProviderID = "wasmccm_get_zone_by_provider_id"
	ExportGetZoneByNodeName   = "wasmccm_get_zone_by_node_name"
	ExportListClusters        = "wasmccm_list_clusters"
	ExportClusterMaster       = "wasmccm_cluster_master"
)

// ExportListLoadBalancers (revision 3) is optional: a method taking a
// String, the cluster name, and answering OwnedLoadBalancers, every load
// balancer the module made for that cluster, with the Service each was
// made for. The host's orphan sweep uses it to find load balancers whose
// Service is gone and deletes them through ExportEnsureLoadBalancerDeleted.
// The listing must be complete: a listing that failed or was cut short is
// an error, never a shorter list.
const ExportListLoadBalancers = "wasmccm_list_load_balancers"

// ExportSetLoadBalancerNodes (revision 6) is optional: a method taking
// LoadBalancerNodes and answering no payload. A host that knows it sends
// an instance the Node list of ExportEnsureLoadBalancer and
// ExportUpdateLoadBalancer (NodesListed) through it, once for as long as
// the list stays the same, and then sends those calls' requests with
// Nodes empty: the module answers them with the list it was sent last.
// The service controller passes every eligible Node to every call, the
// same list until the cluster's Nodes change, so this spares the host
// encoding it and the module decoding it on each call, and lets the
// module keep what it derives from it.
const ExportSetLoadBalancerNodes = "wasmccm_set_load_balancer_nodes"

// NodesListed reports whether export's LoadBalancerRequest lists Nodes.
func NodesListed(export string) bool {
	return export == ExportEnsureLoadBalancer || export == ExportUpdateLoadBalancer
}

// OptionalExports lists the exports a module may add to a capability it
// supports. Each is a method export; the host calls it only when the
// module exports it and supports Requires, and refuses a module that
// exports it without Requires.
var OptionalExports = []struct {
	Export   string
	Requires Capability
}{
	{ExportListLoadBalancers, CapabilityLoadBalancer},
	{ExportSetLoadBalancerNodes, CapabilityLoadBalancer},
}

// Capability names a group of exports that together implement one of
// cloudprovider.Interface's optional parts.
type Capability string

const (
	CapabilityInstancesV2  Capability = "InstancesV2"
	CapabilityInstances    Capability = "Instances"
	CapabilityLoadBalancer Capability = "LoadBalancer"
	CapabilityRoutes       Capability = "Routes"
	CapabilityZones        Capability = "Zones"
	CapabilityClusters     Capability = "Clusters"
)

// Capabilities lists, in a stable order, each capability with the exports
// that make it up. A module supports a capability exactly when it exports
// all of them; exporting some but not all is an error the host reports.
var Capabilities = []struct {
	Capability Capability
	Exports    []string
}{
	{CapabilityInstancesV2, []string{ExportInstanceExists, ExportInstanceShutdown, ExportInstanceMetadata}},
	{CapabilityInstances, []string{
		ExportNodeAddresses, ExportNodeAddressesByProviderID, ExportInstanceID, ExportInstanceType,
		ExportInstanceTypeByProviderID, ExportInstanceExistsByProviderID, ExportInstanceShutdownByProviderID,
		ExportCurrentNodeName,
	}},
	{CapabilityLoadBalancer, []string{
		ExportGetLoadBalancer, ExportGetLoadBalancerName, ExportEnsureLoadBalancer,
		ExportUpdateLoadBalancer, ExportEnsureLoadBalancerDeleted,
	}},
	{CapabilityRoutes, []string{ExportListRoutes, ExportCreateRoute, ExportDeleteRoute}},
	{CapabilityZones, []string{ExportGetZone, ExportGetZoneByProviderID, ExportGetZoneByNodeName}},
	{CapabilityClusters, []string{ExportListClusters, ExportClusterMaster}},
}

// ImportModule is the one namespace of host functions.
const ImportModule = "wasmccm"

// Host imports. Pointers and lengths are i32 offsets into the guest's
// exported memory "memory". A host function that returns data of a size the
// guest cannot know in advance returns that size (>= 0) and keeps the data
// as the instance's pending result; the guest then allocates a buffer and
// calls ImportTakeResult. Negative returns are Errno values.
const (
	// ImportHTTPDo is (req_ptr, req_len i32) -> i32. The request is an
	// HTTPRequest; the pending result is an HTTPResponse.
	ImportHTTPDo = "http_do"
	// ImportCredential is (name_ptr, name_len i32) -> i32. The pending
	// result is the credential's raw value, served only for names the
	// operator lists in credentials.readable; otherwise ErrnoNotGranted.
	// Modules name credentials in requests instead (HeaderCredential).
	ImportCredential = "credential"
	// ImportLog is (level, msg_ptr, msg_len i32) -> ().
	ImportLog = "log"
	// ImportLogEnabled is (level i32) -> i32, 1 when a message at level
	// would be recorded, so guests can skip formatting it.
	ImportLogEnabled = "log_enabled"
	// ImportTakeResult is (ptr, len i32) -> i32: copies the pending result
	// to [ptr, ptr+len), clears it, and returns the number of bytes copied.
	// len must equal the size announced by the call that produced it.
	ImportTakeResult = "take_result"

	// ImportStateGet is (key_ptr, key_len i32, max_age_ms i64, claim i32)
	// -> i32. The pending result is the value stored under key, when it
	// was written at most max_age_ms ago (a negative max_age_ms accepts
	// any age). Otherwise it returns ErrnoNotFound; with claim = 1 the
	// caller then holds the key's claim: other instances asking with claim
	// = 1 wait until the holder stores the key or its call ends, so that
	// one instance fills what all of them need.
	ImportStateGet = "state_get"
	// ImportStateSet is (key_ptr, key_len, val_ptr, val_len i32) -> i32:
	// stores value under key, stamped with the current time, and releases
	// the key's claim. It returns 0, or ErrnoTooLarge.
	ImportStateSet = "state_set"
	// ImportStateDelete is (key_ptr, key_len i32) -> (): removes key, so
	// that the next reader fills it again.
	ImportStateDelete = "state_delete"
)

// MaxStateKeyBytes bounds a shared state key; a longer one is an ABI
// violation.
const MaxStateKeyBytes = 512

// MaxRequestHeaders bounds the headers of an HTTPRequest; a request with
// more is malformed. Empty headers encode in two bytes each and cost the
// host far more once decoded and sent, so a request within its byte limit
// could otherwise make the host allocate many times that limit. No cloud
// API request needs more than a few dozen.
const MaxRequestHeaders = 128

// Reserved request headers (revision 2): an HTTPRequest names the
// credential the host is to authenticate it with, instead of carrying the
// secret, which never enters the module. The host consumes every header
// that starts with HeaderPrefix, whatever its case, and never sends one
// to the cloud; one it does not know fails the request. A request that
// names a credential may not set Authorization itself.
const (
	HeaderPrefix = "Wasmccm-"
	// HeaderCredential names an entry of the cloud-config's
	// credentials.auth. The host applies it only to the origins the
	// operator bound to it, at every redirect hop.
	HeaderCredential = "Wasmccm-Credential"
	// HeaderSigV4Service and HeaderSigV4Region give the AWS service and
	// region a sigv4 credential signs for, overriding its defaults.
	HeaderSigV4Service = "Wasmccm-Sigv4-Service"
	HeaderSigV4Region  = "Wasmccm-Sigv4-Region"
	// HeaderReadOnly (revision 5), with the value ReadOnlyValue, marks a
	// request other than a GET, such as a query API's POST of a Describe
	// action, as one that changes nothing in the cloud: the host may then
	// share the response of an identical request (same method, URL,
	// headers and body) already in flight, as it does for GETs, and does
	// not count it as a write. Any other value fails the request. A host
	// before revision 5 refuses the request before sending it, as it does
	// any reserved header it does not know; the SDK then sends it again
	// unmarked.
	HeaderReadOnly = "Wasmccm-Read-Only"
	ReadOnlyValue  = "true"
)

// Errno is a negative return of a host import.
type Errno int32

const (
	// ErrnoNotGranted: the credential is not readable by this module
	// (credentials.readable), which is the default.
	ErrnoNotGranted Errno = -1
	// ErrnoNotFound: the credential is readable but absent from the mounted
	// secret, or no fresh value is stored under a shared state key.
	ErrnoNotFound Errno = -2
	// ErrnoNoResult: ImportTakeResult with no pending result or a length
	// that does not match it.
	ErrnoNoResult Errno = -3
	// ErrnoTooLarge: a shared state value larger than the host keeps for
	// one key.
	ErrnoTooLarge Errno = -4
)

func (e Errno) Error() string {
	switch e {
	case ErrnoNotGranted:
		return "not granted to this module"
	case ErrnoNotFound:
		return "not found"
	case ErrnoNoResult:
		return "no pending result of that size"
	case ErrnoTooLarge:
		return "value too large"
	}
	return "unknown host error"
}

// LogLevel is the level a guest logs at. The host maps it to klog: errors
// and warnings always, info at verbosity 2, debug at 4.
type LogLevel int32

const (
	LogError LogLevel = iota
	LogWarning
	LogInfo
	LogDebug
)

func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "error"
	case LogWarning:
		return "warning"
	case LogInfo:
		return "info"
	case LogDebug:
		return "debug"
	}
	return "LogLevel(invalid)"
}

// Status is the outcome a guest reports for a method call. It is the first
// field of every result.
type Status uint8

const (
	// StatusOK: the call succeeded; the method's payload follows.
	StatusOK Status = iota
	// StatusNotFound: the instance or object named in the request does not
	// exist. The host maps it to cloudprovider.InstanceNotFound only where
	// upstream controllers expect that error; InstanceExists must answer
	// false with StatusOK to report a missing instance.
	StatusNotFound
	// StatusNotImplemented maps to cloudprovider.NotImplemented.
	StatusNotImplemented
	// StatusImplementedElsewhere maps to cloudprovider.ImplementedElsewhere.
	StatusImplementedElsewhere
	// StatusRetryAfter: a transient failure; the controller should retry
	// after RetryAfter. Maps to cloud-provider's api.RetryError.
	StatusRetryAfter
	// StatusError: any other failure, described by Message.
	StatusError
	statusCount
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "OK"
	case StatusNotFound:
		return "NotFound"
	case StatusNotImplemented:
		return "NotImplemented"
	case StatusImplementedElsewhere:
		return "ImplementedElsewhere"
	case StatusRetryAfter:
		return "RetryAfter"
	case StatusError:
		return "Error"
	}
	return "Status(invalid)"
}

// Outcome is the envelope of every method result: a Status, a message for
// non-OK statuses, and a delay for StatusRetryAfter. The method's payload
// follows it only when Status is StatusOK.
type Outcome struct {
	Status     Status
	Message    string
	RetryAfter time.Duration
}

// Encode writes the envelope.
func (o *Outcome) Encode(e *Encoder) {
	e.buf = append(e.buf, byte(o.Status))
	if o.Status != StatusOK {
		e.String(o.Message)
		e.Uint(uint64(o.RetryAfter / time.Millisecond))
	}
}

// Decode reads the envelope and rejects unknown statuses.
func (o *Outcome) Decode(d *Decoder) {
	if d.err != nil {
		return
	}
	if len(d.buf) == 0 || Status(d.buf[0]) >= statusCount {
		d.fail()
		return
	}
	o.Status = Status(d.buf[0])
	d.buf = d.buf[1:]
	o.Message, o.RetryAfter = "", 0
	if o.Status != StatusOK {
		o.Message = d.String()
		ms := d.Uint()
		if ms > uint64(maxRetryAfter/time.Millisecond) {
			ms = uint64(maxRetryAfter / time.Millisecond)
		}
		o.RetryAfter = time.Duration(ms) * time.Millisecond
	}
}

// maxRetryAfter caps a guest-requested delay so that a bogus value cannot
// park a Service for years.
const maxRetryAfter = time.Hour

// EncodeResult writes a complete method result into buf[:0]: the envelope
// and, for StatusOK, the payload (which may be nil for methods without one).
func EncodeResult(buf []byte, o Outcome, payload Message) []byte {
	e := Encoder{buf: buf[:0]}
	o.Encode(&e)
	if o.Status == StatusOK && payload != nil {
		payload.Encode(&e)
	}
	return e.buf
}

// DecodeResult reads a method result. The payload is decoded only when the
// status is StatusOK; payload may be nil for methods without one.
func DecodeResult(b []byte, payload Message) (Outcome, error) {
	d := Decoder{buf: b}
	var o Outcome
	o.Decode(&d)
	if d.err == nil && o.Status == StatusOK && payload != nil {
		payload.Decode(&d)
	}
	return o, d.Finish()
}

// PackResult packs a result location the way method exports return it.
func PackResult(ptr, size uint32) uint64 { return uint64(ptr)<<32 | uint64(size) }

// UnpackResult is PackResult's inverse.
func UnpackResult(v uint64) (ptr, size uint32) { return uint32(v >> 32), uint32(v) }
