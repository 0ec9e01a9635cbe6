package egress

import (
	"context"
	"encoding/binary"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

// flights coalesces identical reads: a GET that another instance of the
// same module already has in flight, to the same URL with the same headers
// (so the same credential), waits for that request's response instead of
// sending its own. A pool of instances answering the controllers' calls
// about many Nodes at once otherwise asks the cloud the same question once
// per instance, and a cloud's rate limit counts every one.
//
// It is safe because a read joins only a request that began after the
// module's last write ended: writes counts the start and the end of every
// non-read request, and a flight records the count it began with. An
// instance that wrote and then reads never joins a read sent before its
// write finished, so it sees its own writes as it would without the host
// in between. Requests that are not reads are never joined, and a module
// opts a read out with the request header "Cache-Control: no-cache" (or
// no-store), which the cloud receives as well. A read is a GET or HEAD
// without a body, or a POST or QUERY the module marks with
// abi.HeaderReadOnly, such as a query API's POST of a Describe action,
// whose body is then part of what must be identical. A module that marks
// a write so only ever shares its own answers, never another module's.
type flights struct {
	writes atomic.Uint64

	mu       sync.Mutex
	inFlight map[string]*flight
}

type flight struct {
	writes uint64
	done   chan struct{}
	sent   sent
	// joined counts the requests waiting on this one.
	joined atomic.Int32
}

// write marks the start or end of a write.
func (f *flights) write() { f.writes.Add(1) }

// do sends the request through send unless an identical one, begun since
// the last write ended, is in flight, in which case it waits for and
// shares what became of that one (joined), a shadow's refusal included,
// unless ctx ends first. A shared response is read-only: every instance
// copies it into its own memory.
func (f *flights) do(ctx context.Context, key string, send func() sent) (s sent, joined bool) {
	writes := f.writes.Load()
	f.mu.Lock()
	if fl, ok := f.inFlight[key]; ok && fl.writes == writes {
		fl.joined.Add(1)
		f.mu.Unlock()
		select {
		case <-fl.done:
			return fl.sent, true
		case <-ctx.Done():
			// Not joined: the flight's outcome is not this caller's, and
			// is still being written.
			return sent{resp: &abi.HTTPResponse{Error: "timed out waiting for an identical request in flight"}}, false
		}
	}
	fl := &flight{writes: writes, done: make(chan struct{})}
	if f.inFlight == nil {
		f.inFlight = map[string]*flight{}
	}
	// A flight from before a write is replaced: later reads join this one.
	f.inFlight[key] = fl
	f.mu.Unlock()

	fl.sent = send()
	f.mu.Lock()
	if f.inFlight[key] == fl {
		delete(f.inFlight, key)
	}
	f.mu.Unlock()
	close(fl.done)
	return fl.sent, false
}

// isRead reports the requests that change nothing in the cloud: those of
// a read method, and those the module marks read-only.
func isRead(req *abi.HTTPRequest) bool {
	return readMethod(req.Method) || markedReadOnly(req)
}

func readMethod(m string) bool { return m == "" || m == http.MethodGet || m == http.MethodHead }

// markedReadOnly reports a request marked with abi.HeaderReadOnly, whatever
// its value, on a method the mark is accepted on
// (credentials.ReadOnlyMethod): a wrong value fails the request
// (newRequest), and a request that fails is no write either. A marked
// request of another method is a write, never joined, and fails.
func markedReadOnly(req *abi.HTTPRequest) bool {
	return credentials.ReadOnlyMethod(req.Method) &&
		slices.ContainsFunc(req.Headers, func(h abi.Header) bool { return strings.EqualFold(h.Name, abi.HeaderReadOnly) })
}

// coalesceKey identifies a read by everything the cloud sees of it except
// the timeout; ok is false for requests that must not be joined. Every
// field is prefixed with its length: with separators, a value holding the
// separator could pass for several fields, and a crafted request would
// join, or be joined by, a different one.
func coalesceKey(req *abi.HTTPRequest) (key string, ok bool) {
	marked := markedReadOnly(req)
	if !isRead(req) || len(req.Body) > 0 && !marked {
		return "", false
	}
	b := appendField(nil, req.Method)
	b = appendField(b, req.URL)
	b = appendField(b, string(req.Body))
	for _, h := range req.Headers {
		if strings.EqualFold(h.Name, "Cache-Control") && (strings.Contains(h.Value, "no-cache") || strings.Contains(h.Value, "no-store")) {
			return "", false
		}
		b = appendField(appendField(b, h.Name), h.Value)
	}
	return string(b), true
}

func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
