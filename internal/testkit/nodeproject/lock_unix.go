//go:build unix

package nodeproject

import (
	"errors"
	"os"
	"syscall"
)

// LockFile takes an exclusive advisory lock (flock) on path, creating the file if needed and
// waiting for the lock; the returned function releases it. The lock belongs to the open file,
// so it is released as well when the process dies.
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close() // opened read-only: nothing to lose
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close() // opened read-only: nothing to lose
	}, nil
}
