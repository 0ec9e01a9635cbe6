package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLinksInto: only links pointing below the target are found, so
// neither the leftovers check nor the stop touches other clusters' or the
// host's container logs.
func TestLinksInto(t *testing.T) {
	dir, target := t.TempDir(), filepath.Join(t.TempDir(), "cluster")
	for name, dest := range map[string]string{
		"ours.log":    filepath.Join(target, "nodes/a/pod-logs/x.log"),
		"other.log":   filepath.Join(target+"-other", "x.log"),
		"target.log":  target, // the directory itself, not below it
		"foreign.log": "/var/log/pods/y.log",
	} {
		if err := os.Symlink(dest, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links, err := linksInto(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "ours.log")}; !slices.Equal(links, want) {
		t.Fatalf("linksInto = %v, want %v", links, want)
	}
	if err := removeLinksInto(dir, target); err != nil {
		t.Fatal(err)
	}
	if links, err := linksInto(dir, target); err != nil || len(links) != 0 {
		t.Fatalf("after removeLinksInto: %v, %v", links, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "other.log")); err != nil {
		t.Fatalf("a link of another target was removed: %v", err)
	}
	if links, err := linksInto(filepath.Join(dir, "absent"), target); err != nil || links != nil {
		t.Fatalf("missing directory: %v, %v", links, err)
	}
}

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
