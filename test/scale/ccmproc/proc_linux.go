package ccmproc

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

var terminate = syscall.SIGTERM

// dieWithParent has cmd killed when the test binary dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// ReadStat reads a process's figures from /proc; zero when pid is 0 or
// gone.
func ReadStat(pid int) Stat {
	if pid <= 0 {
		return Stat{}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}
	}
	// Fields after the command name, which may contain spaces: utime is
	// field 14 and stime 15, in clock ticks of 1/100 s.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return Stat{}
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	st := Stat{CPU: time.Duration(utime+stime) * 10 * time.Millisecond}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.SplitSeq(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			st.RSS = kb << 10
		case "VmHWM":
			st.HWM = kb << 10
		}
	}
	return st
}

// FindAPIServer returns the pid of the kube-apiserver serving host
// ("https://127.0.0.1:PORT"), 0 when none is found.
func FindAPIServer(host string) int {
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

// Mappings sums a process's resident memory by kind of mapping, from
// /proc/PID/smaps: the executable's own file, other files, the stacks,
// anonymous executable memory (compiled Wasm) and other anonymous memory
// (the Go heap and whatever else is mmapped without a file). Empty when
// pid is gone.
func Mappings(pid int) map[string]int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps")
	if err != nil {
		return nil
	}
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	out := map[string]int64{}
	kind := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			path := ""
			if len(fields) >= 6 {
				path = fields[5]
			}
			switch {
			case path == exe:
				kind = "executable file"
			case strings.HasPrefix(path, "/"):
				kind = "other files"
			case path == "[stack]":
				kind = "stack"
			case strings.Contains(fields[1], "x"):
				kind = "anonymous, executable"
			default:
				kind = "anonymous"
			}
			continue
		}
		if len(fields) == 3 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			out[kind] += kb << 10
		}
	}
	return out
}
