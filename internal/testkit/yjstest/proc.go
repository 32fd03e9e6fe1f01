package yjstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// proc is a node script of e2e/yjs speaking JSON lines: lines on stdin, one callback per line of
// stdout. It ends when its stdin closes (every script exits then) or when killed.
type proc struct {
	name   string // for messages: "check.mjs"
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	exited chan struct{} // closed when the process has exited and stdout is drained
	mu     sync.Mutex    // serializes writes to stdin
}

// startProc starts node with args in e2e/yjs; onLine gets each line of stdout (without the
// newline), in order, from one goroutine.
func startProc(env environment, onLine func([]byte), args ...string) (*proc, error) {
	cmd := exec.Command(env.Node, args...)
	cmd.Dir = env.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{name: args[0], cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("yjstest: starting %s %s in %s: %w", env.Node, strings.Join(args, " "), env.Dir, err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				onLine(bytes.TrimRight(line, "\r\n"))
			}
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// writeLine writes b and a newline to the process's stdin.
func (p *proc) writeLine(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("yjstest: writing to %s: %w%s", p.name, err, p.exitInfo())
	}
	return nil
}

// exitInfo says how the process ended and what it wrote on stderr, once it has exited.
func (p *proc) exitInfo() string {
	select {
	case <-p.exited:
		return fmt.Sprintf("; %s has exited (%v); stderr:\n%s", p.name, p.cmd.ProcessState, p.stderr)
	default:
		return ""
	}
}

// stop closes stdin, waits up to grace for the process to exit, and kills it otherwise.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	_ = p.stdin.Close()
	p.mu.Unlock()
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	p.kill()
}

// kill kills the process and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second): // WaitDelay bounds it; do not hang a test regardless
	}
}

// syncBuffer is a process's stderr, kept to explain failures.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Keep the first 1 MiB: enough to explain a failure, bounded when a script is chatty.
	if room := 1<<20 - s.buf.Len(); room > 0 {
		s.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
