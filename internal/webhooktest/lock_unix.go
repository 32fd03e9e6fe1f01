//go:build unix

package webhooktest

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock (flock) on an existing file, waiting for it; the
// returned function releases it. The lock belongs to the open file, so it is released as well
// when the process dies.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
