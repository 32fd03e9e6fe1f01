//go:build !unix

package nodeproject

import "os"

// LockFile does not lock where flock is missing: concurrent test binaries may then both run
// npm ci on a fresh clone, or both generate the same cached fixtures (the rename into place
// keeps that safe). CI and development run on Unix.
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}
