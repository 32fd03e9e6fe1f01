package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// nodeProc is a script of e2e/yjs (the driver or a peer server) as the benchmark runs it: its
// stdout read line by line, its stderr kept to explain failures, and its stdin held open,
// since every such script runs until its stdin ends.
type nodeProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout; closed once the process has exited
	stderr *tailWriter
	err    error // cmd.Wait's, once lines is closed
}

// maxLines is how many lines of stdout a script may print ahead of the reader; the scripts
// print one to three.
const maxLines = 64

// startNode starts node with args in e2e/yjs.
func startNode(node nodeproject.Project, args ...string) (*nodeProc, error) {
	cmd := exec.Command(node.Node, args...) //nolint:gosec // G204: node on this repository's own scripts
	cmd.Dir = node.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("crdtsync: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("crdtsync: %w", err)
	}
	p := &nodeProc{name: strings.Join(args, " "), cmd: cmd, stdin: stdin, lines: make(chan string, maxLines), stderr: &tailWriter{max: 64 << 10}}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("crdtsync: starting node %s: %w", p.name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // more than a script prints: not ours to read
			}
		}
		p.err = cmd.Wait()
		close(p.lines)
	}()
	return p, nil
}

// pid is the process id, for /proc.
func (p *nodeProc) pid() int { return p.cmd.Process.Pid }

// line waits up to within for the next line of stdout.
func (p *nodeProc) line(ctx context.Context, within time.Duration, what string) (string, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("crdtsync: waiting for %s: node %s exited: %w; its stderr: %s", what, p.name, exitErr(p.err), p.stderr)
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("crdtsync: waiting for %s: nothing from node %s within %v; its stderr: %s", what, p.name, within, p.stderr)
	case <-ctx.Done():
		return "", fmt.Errorf("crdtsync: waiting for %s: %w", what, ctx.Err())
	}
}

// wait waits up to within for the process to exit on its own and returns how it ended;
// after within it kills the process.
func (p *nodeProc) wait(within time.Duration) error {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case _, ok := <-p.lines:
			if ok {
				continue // a line nobody waits for
			}
			if p.err != nil {
				return fmt.Errorf("crdtsync: node %s: %w; its stderr: %s", p.name, p.err, p.stderr)
			}
			return nil
		case <-t.C:
			_ = p.cmd.Process.Kill()
			for range p.lines {
			}
			return fmt.Errorf("crdtsync: node %s still running after %v: killed", p.name, within)
		}
	}
}

// stop ends the process: its stdin closed, and killed when it has not exited within grace.
func (p *nodeProc) stop(grace time.Duration) error {
	if err := p.stdin.Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("crdtsync: closing node %s's stdin: %w", p.name, err)
	}
	return p.wait(grace)
}

// errExitedZero is a process that exited with status 0 before it was expected to.
var errExitedZero = errors.New("exit status 0")

func exitErr(err error) error {
	if err == nil {
		return errExitedZero
	}
	return err
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
