// Package collabproc starts real collabd processes for benchmarks and process-level tests, so
// that what they measure is a whole server as it is deployed: its own binary (built from this
// module once per process, without the race detector), on loopback ports, on the memory
// store, and observed from outside through /proc (resident memory, its peak, CPU time), never
// through figures the server reports about itself.
//
// A Server also knows the development workspace's credentials and makes what a live-sync
// client needs: an organization and a document, a token with a role on it, the sync URL; or,
// for many documents, batches of them and one member's token for all.
package collabproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is one running collabd process.
type Server struct {
	// PID is the process id, for /proc.
	PID int
	// BaseURL is the HTTP API's root, http://127.0.0.1:port.
	BaseURL string
	// GRPCAddr is the gRPC listener's host:port.
	GRPCAddr string
	// The development workspace's credentials, from the banner.
	WorkspaceID, WorkspaceToken string
	APIKey, AuthToken           string

	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has exited
	stdout *tail         // the banner
	stderr *tail         // the log
}

// startTimeout bounds how long Start waits for the banner and for /readyz.
const startTimeout = 60 * time.Second

// Start runs collabd on loopback ports (chosen by the kernel and read from its banner) with
// the memory store and the development workspace, adds args (--rate-limit=off,
// --log-level=warn, ...; a later flag overrides an earlier one), and returns once /readyz
// answers 200. The process gets the caller's environment without COLLAB_* variables, so
// nothing outside the arguments configures it. Stop it with Stop or Kill.
func Start(ctx context.Context, args ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	mail, err := os.MkdirTemp("", "collabproc-mail-")
	if err != nil {
		return nil, fmt.Errorf("collabproc: mail directory: %w", err)
	}
	base := []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--mail-dir=" + mail}
	cmd := exec.Command(bin, append(base, args...)...) //nolint:gosec // G204: the binary this package built, with the caller's flags
	cmd.Env = withoutCollabVars(os.Environ())
	s := &Server{cmd: cmd, done: make(chan struct{}), stdout: &tail{max: 64 << 10}, stderr: &tail{max: 64 << 10}}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("collabproc: start %s: %w", bin, err)
	}
	s.PID = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		_ = os.RemoveAll(mail)
		close(s.done)
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.readBanner(ctx); err != nil {
		_ = s.Kill()
		return nil, fmt.Errorf("collabproc: %w; its log: %s", err, s.Logs())
	}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Kill()
		return nil, fmt.Errorf("collabproc: %w; its log: %s", err, s.Logs())
	}
	return s, nil
}

// readBanner waits for the banner (collabd/banner.go) up to the development workspace's auth
// token, its last field, and reads the addresses and credentials from it.
func (s *Server) readBanner(ctx context.Context) error {
	fields := map[string]*string{
		"HTTP API:": &s.BaseURL, "gRPC:": &s.GRPCAddr, "workspace id:": &s.WorkspaceID,
		"workspace auth token:": &s.WorkspaceToken, "API key:": &s.APIKey, "auth token:": &s.AuthToken,
	}
	for s.AuthToken == "" {
		select {
		case <-ctx.Done():
			return errors.New("no banner with the development workspace on stdout")
		case <-s.done:
			return errors.New("collabd exited before its banner")
		case <-time.After(20 * time.Millisecond):
		}
		for _, l := range strings.Split(s.stdout.String(), "\n") {
			l = strings.TrimSpace(l)
			for prefix, dst := range fields {
				if v, found := strings.CutPrefix(l, prefix); found && strings.TrimSpace(v) != "" {
					*dst = strings.Fields(v)[0]
				}
			}
		}
	}
	if !strings.HasPrefix(s.BaseURL, "http://127.0.0.1:") {
		return fmt.Errorf("banner gave the HTTP API at %q, not on loopback", s.BaseURL)
	}
	return nil
}

// waitReady polls /readyz until every service answers.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.BaseURL+"/readyz", nil)
		if err != nil {
			return fmt.Errorf("readyz: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready at %s within %v", s.BaseURL, startTimeout)
		case <-s.done:
			return errors.New("collabd exited before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exited is closed once the process has exited (stopped, killed, or on its own).
func (s *Server) Exited() <-chan struct{} { return s.done }

// stopGrace is how long Stop waits after SIGTERM before it kills.
const stopGrace = 3 * time.Second

// Stop ends the process: SIGTERM, then SIGKILL when it has not exited within 3 s.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("collabproc: SIGTERM %d: %w", s.PID, err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(stopGrace):
		return s.Kill()
	}
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (s *Server) Kill() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("collabproc: kill %d: %w", s.PID, err)
	}
	<-s.done
	return nil
}

// Logs is the end of what the process wrote to stderr (its log), at most 64 KiB.
func (s *Server) Logs() string { return s.stderr.String() }

// withoutCollabVars drops COLLAB_* from an environment: collabd reads its flags from them.
func withoutCollabVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "COLLAB_") {
			out = append(out, kv)
		}
	}
	return out
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary builds ./cmd/collabd of this module once per process (later calls return the same
// path) into a temporary directory, which Cleanup removes. The race detector stays out of it
// even when the caller runs under -race: the server's memory is what is measured.
func Binary() (string, error) {
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		if build.dir, err = os.MkdirTemp("", "collabproc-"); err != nil {
			build.err = fmt.Errorf("collabproc: %w", err)
			return
		}
		build.path = filepath.Join(build.dir, "collabd")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/collabd") //nolint:gosec // G204: go build of this module's own command
		cmd.Dir = root
		cmd.Env = append(withoutCollabVars(os.Environ()), "GOFLAGS="+withoutRace(os.Getenv("GOFLAGS")))
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("collabproc: go build ./cmd/collabd in %s: %w\n%s", root, err, out)
		}
	})
	return build.path, build.err
}

// Cleanup removes the binary Binary built; a program calls it before it exits, a test binary
// from TestMain.
func Cleanup() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && !strings.HasPrefix(f, "-race=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// moduleRoot finds the module's directory: from this source file's directory (it is
// bench/collabproc of the module), else from `go env GOMOD` in the working directory.
func moduleRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if isCollabModule(root) {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("collabproc: go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if !isCollabModule(root) {
		return "", fmt.Errorf("collabproc: %s is not the collab module; run from inside it", root)
	}
	return root, nil
}

func isCollabModule(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module github.com/collab/collab"
}
