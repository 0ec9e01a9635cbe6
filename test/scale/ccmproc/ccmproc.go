// Package ccmproc runs a cloud-controller-manager binary for the scale
// benchmarks (test/scale, test/scale/requests): started with a free
// secure port, ready once /healthz answers, its log kept in a file, killed
// with the test binary, its CPU time and memory read from /proc and its
// CPU profile fetched from /debug/pprof, so that every benchmark measures a
// CCM the same way.
package ccmproc

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Process is a running CCM.
type Process struct {
	Cmd *exec.Cmd
	// LogPath holds its stdout and stderr.
	LogPath string
	// URL is its secure port's, https://127.0.0.1:<port>.
	URL string
	// Started is when it was started, Startup how long it took to answer
	// /healthz.
	Started time.Time
	Startup time.Duration
	done    chan struct{}
}

// Stat is a process's user+system CPU time, resident set and its peak.
type Stat struct {
	CPU      time.Duration
	RSS, HWM int64
}

// Start runs binary with args (and --secure-port) and env added to the
// test's environment, logging to dir/ccm.log, and returns once /healthz
// answers 200; it fails t if the process exits or is not healthy within
// two minutes. The process is stopped when t ends, and its log's tail
// printed if t failed.
func Start(t testing.TB, binary, dir string, args, env []string) *Process {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &Process{LogPath: filepath.Join(dir, "ccm.log"), URL: fmt.Sprintf("https://127.0.0.1:%d", port), done: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd = exec.Command(binary, append(args, fmt.Sprintf("--secure-port=%d", port))...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	dieWithParent(p.Cmd)
	p.Started = time.Now()
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("CCM log tail:\n%s", p.LogTail(40))
		}
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: insecure}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.CheckAlive(t)
		resp, err := client.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.Startup = time.Since(p.Started)
				return p
			}
		}
	}
	t.Fatalf("CCM not healthy after 2m:\n%s", p.LogTail(40))
	return nil
}

// insecure trusts the CCM's self-signed serving certificate.
var insecure = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}

// CPUProfile samples the CCM's CPU for d and returns the profile, in
// pprof's format. The CCM serves it on its secure port (--profiling, on by
// default) to whom the cluster authorizes: token is one of the cluster's,
// allowed the nonResourceURL /debug/pprof/profile.
func (p *Process) CPUProfile(ctx context.Context, d time.Duration, token string) ([]byte, error) {
	return p.debug(ctx, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), token)
}

// HeapProfile returns the CCM's heap profile after a collection, in
// pprof's format with debug 0, or as text with the runtime's MemStats
// with debug 1; token as for CPUProfile.
func (p *Process) HeapProfile(ctx context.Context, debug int, token string) ([]byte, error) {
	return p.debug(ctx, fmt.Sprintf("heap?gc=1&debug=%d", debug), token)
}

// debug fetches /debug/pprof/path from the CCM.
func (p *Process) debug(ctx context.Context, path, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/debug/pprof/"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := insecure.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return b, nil
}

// CheckAlive fails t if the CCM has exited.
func (p *Process) CheckAlive(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("the CCM exited:\n%s", p.LogTail(40))
	default:
	}
}

// Stat reads the CCM's figures; zero once it has exited.
func (p *Process) Stat() Stat { return ReadStat(p.Cmd.Process.Pid) }

// Stop reads the final figures and stops the CCM (SIGTERM, then SIGKILL
// after 10 s); it is safe to call twice.
func (p *Process) Stop() Stat {
	select {
	case <-p.done:
		return Stat{}
	default:
	}
	st := p.Stat()
	p.Cmd.Process.Signal(terminate)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Cmd.Process.Kill()
		<-p.done
	}
	return st
}

// LogTail returns the log's last lines.
func (p *Process) LogTail(lines int) string {
	b, _ := os.ReadFile(p.LogPath)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
