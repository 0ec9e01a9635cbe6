//go:build !unix

package wasmbuild

// lockFile does not lock where flock is missing: processes building the
// same module at once each build it, and the last rename wins.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
