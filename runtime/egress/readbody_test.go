package egress

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadBody: a body is read whole up to the limit and one byte past it,
// whatever length was announced, and a body of the announced length is
// read into one buffer of that length.
func TestReadBody(t *testing.T) {
	const limit = 16
	for _, c := range []struct {
		name      string
		body      string
		announced int64
		want      string
		// oneBuffer: the body is read into the buffer made for its
		// announced length, grown never.
		oneBuffer bool
	}{
		{"announced", "0123456789", 10, "0123456789", true},
		{"not announced", "0123456789", -1, "0123456789", false},
		{"empty", "", 0, "", false},
		{"longer than announced", "0123456789", 4, "0123456789", false},
		{"shorter than announced", "0123", 10, "0123", false},
		{"over the limit, announced", strings.Repeat("x", 40), 40, strings.Repeat("x", limit+1), false},
		{"over the limit, not announced", strings.Repeat("x", 40), -1, strings.Repeat("x", limit+1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(c.body)), ContentLength: c.announced}
			got, err := readBody(resp, limit)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("read %q, want %q", got, c.want)
			}
			if want := len(got) + bytes.MinRead; c.oneBuffer && cap(got) != want {
				t.Errorf("a body of the announced length took a buffer of %d bytes, want %d", cap(got), want)
			}
		})
	}
}
