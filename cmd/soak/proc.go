package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is a child process: an app instance or the postmaster.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // what Wait returned; read only after exited is closed
}

// startProc starts path with args and env, its output appended to logPath. The child gets a
// process group of its own, so that a Ctrl-C at the terminal reaches the tool alone and the
// children are stopped in order, and the kernel kills it should the tool die without cleaning up.
// cred, when set, runs it as another user (the cluster's owner when the tool runs as root).
func startProc(name, path string, args, env []string, logPath string, cred *syscall.Credential) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: a path in the run's own directory.
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...) //nolint:gosec // G204: the tool's own web binary and PostgreSQL's, with arguments it built.
	cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	err = cmd.Start()
	// The child holds its own copy of the descriptor; the file may be reopened for reading.
	closeErr := log.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if closeErr != nil {
		_ = cmd.Process.Kill() // the log's error is the one to report
		return nil, closeErr
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the process with SIGKILL, as an operator's kill -9 or the OOM killer does, and
// waits until it is gone.
func (p *proc) kill9() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// stop asks the process to stop with sig and kills it if it has not within grace. A process that
// has already exited is left alone.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		if err := p.kill9(); err != nil {
			return err
		}
		return fmt.Errorf("%s did not stop within %s after %s and was killed", p.name, grace, sig)
	}
}

// runCommand runs a short command to its end and returns its output, which an error carries too.
func runCommand(name, path string, args, env []string, cred *syscall.Credential) (string, error) {
	cmd := exec.Command(path, args...) //nolint:gosec // G204: the tool's own web binary and PostgreSQL's, with arguments it built.
	var out bytes.Buffer
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(out.Bytes()))
	}
	return out.String(), nil
}

// tail is the last n lines of a log, for an error message.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a log in the run's own directory.
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
