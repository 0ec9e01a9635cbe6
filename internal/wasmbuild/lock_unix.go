//go:build unix

package wasmbuild

import (
	"os"
	"syscall"
)

// lockFile waits for an exclusive lock on path, shared with every process
// that locks the same file, and holds it until unlock. The kernel drops
// the lock when its holder exits, so a build killed midway blocks no one.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
