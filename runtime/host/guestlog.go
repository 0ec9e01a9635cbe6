package host

import (
	"bytes"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
)

// maxLogLine bounds one guest log message; longer ones are cut.
const maxLogLine = 4096

// guestLogger writes a module's log lines to klog, tagged with the module,
// under a rate limit shared by all of the module's instances: a guest that
// floods its log loses lines, counted in a metric, and cannot slow the CCM.
// A tool's sink (Config.Log) takes every line instead.
type guestLogger struct {
	module  string
	limiter *rate.Limiter
	sink    func(abi.LogLevel, string)
}

func newGuestLogger(module string, sink func(abi.LogLevel, string)) *guestLogger {
	return &guestLogger{module: module, limiter: rate.NewLimiter(100, 200), sink: sink}
}

func (g *guestLogger) enabled(level abi.LogLevel) bool {
	if g.sink != nil {
		return true
	}
	switch level {
	case abi.LogError, abi.LogWarning:
		return true
	case abi.LogInfo:
		return klog.V(2).Enabled()
	default:
		return klog.V(4).Enabled()
	}
}

func (g *guestLogger) log(level abi.LogLevel, msg []byte) {
	if g.sink != nil {
		g.sink(level, string(msg))
		return
	}
	if !g.enabled(level) {
		return
	}
	if !g.limiter.Allow() {
		logDropped.WithLabelValues(g.module).Inc()
		return
	}
	if len(msg) > maxLogLine {
		msg = append(msg[:maxLogLine:maxLogLine], "…(truncated)"...)
	}
	switch level {
	case abi.LogError:
		klog.ErrorS(nil, string(msg), "module", g.module)
	case abi.LogWarning:
		klog.InfoS(string(msg), "module", g.module, "severity", "warning")
	case abi.LogInfo:
		klog.V(2).InfoS(string(msg), "module", g.module)
	default:
		klog.V(4).InfoS(string(msg), "module", g.module)
	}
}

// streamWriter turns a guest's stdout or stderr into log lines at a fixed
// level. Go and TinyGo print panics to stderr, so this is where a trap's
// explanation shows up.
type streamWriter struct {
	logger *guestLogger
	level  abi.LogLevel
	mu     sync.Mutex
	line   []byte
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if room := maxLogLine - len(w.line); room > 0 {
				w.line = append(w.line, p[:min(room, len(p))]...)
			}
			break
		}
		w.line = append(w.line, p[:min(i, max(0, maxLogLine-len(w.line)))]...)
		w.logger.log(w.level, w.line)
		w.line = w.line[:0]
		p = p[i+1:]
	}
	return n, nil
}
