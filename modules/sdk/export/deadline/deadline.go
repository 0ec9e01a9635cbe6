// Package deadline adds the optional export through which the host tells
// the module each call's deadline (ABI revision 4): import it for its side
// effect, and the context every method receives carries that deadline,
// less a tenth of the time left (a second at most) kept for the answer,
// which the rest client also bounds its requests by. A module that waits
// on asynchronous cloud actions wants it, to poll while time is left and
// then answer sdk.RetryAfter. It is a package of its own, not part of
// every module, because it costs one more entry into the module per call,
// which a module that never looks at its deadline need not pay; without
// it, methods get a context without a deadline, as on a host older than
// revision 4.
package deadline
