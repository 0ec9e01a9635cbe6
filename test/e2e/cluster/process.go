package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a process may take to exit after SIGTERM before it
// is killed. Both binaries normally exit well within it.
const stopGrace = 10 * time.Second

// logTailBytes bounds how much of a log an error message quotes.
const logTailBytes = 4 << 10

// process is a child process whose combined output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	waitErr error         // valid after done is closed
}

// startProcess runs binary with args, logging to dir/<name>.log, in this
// process's environment with env added.
func startProcess(name, binary, dir string, args []string, env ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The child holds its own descriptor; ours is no longer needed.
	defer logFile.Close()

	cmd := exec.Command(binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = ChildAttrs()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited returns an error with the log tail if the process is no longer
// running, which turns a crash during startup into an immediate failure
// rather than a readiness timeout.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.waitErr, p.logTail())
	default:
		return nil
	}
}

// logTail returns the end of the process's log, labelled for error messages.
func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no %s log: %v)", p.name, err)
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return fmt.Sprintf("--- last lines of %s log ---\n%s--- end of %s log ---", p.name, data, p.name)
}

// stop sends SIGTERM, escalates to SIGKILL after stopGrace, and waits for
// the exit. A nil process, one never started, is a no-op.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}
