// Package egress is what becomes of a module's HTTP request, the http_do
// host function's. A Client, made from the operator's Config, checks the
// request's origin against the allowlist (every redirect hop too), refuses
// before anything is spent what the host would refuse anyway (forbidden
// methods, invalid headers, what the credentials' reserved headers ask),
// joins an identical read already in flight for another instance of the
// same module, holds the request for its origin's RateBudget, and sends it
// through a dialer that refuses internal addresses unless the allowlist
// names them by IP. The module's credentials are applied on the way out
// (credentials.Authenticator), and every secret of the process is searched
// for in what comes back (credentials.Redact). The
// RateBudget, one per module and shared by every generation of it (the
// module in service and a rollout's candidate), follows the cloud's quota
// headers and reports throttling (Throttle). The package also holds
// the metrics of these requests.
//
// A Client answers every request with an abi.HTTPResponse, failures in its
// Error field, and says when the rate budget refused the request of a
// module in shadow for want of spare room, so that the host can withhold
// the answer of the call it came in.
package egress
