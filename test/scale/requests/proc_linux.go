package requests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// terminate asks the CCM to stop.
var terminate = syscall.SIGTERM

// dieWithParent has cmd killed when the test binary dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

type stat struct {
	cpu time.Duration
	rss int64
}

// procStat reads a process's user+system CPU time and resident set from
// /proc; zero when pid is 0 or gone.
func procStat(pid int) stat {
	if pid <= 0 {
		return stat{}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}
	}
	// Fields after the command name, which may contain spaces: utime is
	// field 14 and stime 15, in clock ticks of 1/100 s.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return stat{}
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	st := stat{cpu: time.Duration(utime+stime) * 10 * time.Millisecond}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			st.rss = kb << 10
		}
	}
	return st
}

// findAPIServer returns the pid of the kube-apiserver serving host
// ("https://127.0.0.1:PORT"), 0 when none is found.
func findAPIServer(host string) int {
	i := strings.LastIndexByte(host, ':')
	if i < 0 {
		return 0
	}
	want := []byte("--secure-port=" + host[i+1:] + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		if exe, _, _ := bytes.Cut(b, []byte{0}); filepath.Base(string(exe)) == "kube-apiserver" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			return pid
		}
	}
	return 0
}
