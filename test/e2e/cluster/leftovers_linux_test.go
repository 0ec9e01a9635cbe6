package cluster

import "testing"

func TestUnescapeMountPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/tmp/plain", "/tmp/plain"},
		{`/tmp/with\040blank`, "/tmp/with blank"},
		{`/tmp/back\134slash`, `/tmp/back\slash`},
		{`/tmp/tab\011end\040`, "/tmp/tab\tend "},
		{`/tmp/not\08escape`, `/tmp/not\08escape`},
		{`/tmp/short\04`, `/tmp/short\04`},
	}
	for _, tt := range tests {
		if got := unescapeMountPath(tt.in); got != tt.want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
