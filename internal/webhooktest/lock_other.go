//go:build !unix

package webhooktest

// lockFile does not lock where flock is missing: concurrent test binaries may then both run
// npm ci on a fresh clone. CI and development run on Unix.
func lockFile(path string) (unlock func(), err error) {
	return func() {}, nil
}
