package imageref_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/wasmccm/wasmccm/runtime/oci/imageref"
)

func TestParse(t *testing.T) {
	const digest = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name      string
		ref       string
		allowTags bool
		// wantErr is a substring of the error; wantTagRefused says the
		// error is ErrTagRefused.
		wantErr        string
		wantTagRefused bool
		wantDigest     bool
	}{
		{name: "digest", ref: "registry.example:5000/providers/simcloud@" + digest, wantDigest: true},
		{name: "digest with tags allowed", ref: "registry.example/simcloud@" + digest, allowTags: true, wantDigest: true},
		{name: "tag refused", ref: "registry.example/simcloud:v1", wantErr: "pin it as registry.example/simcloud@sha256:<digest>", wantTagRefused: true},
		// StrictValidation: no implicit :latest.
		{name: "no tag, no digest", ref: "registry.example/simcloud", allowTags: true, wantErr: `reference "registry.example/simcloud"`},
		{name: "tag allowed", ref: "registry.example/simcloud:v1", allowTags: true},
		{name: "malformed digest", ref: "registry.example/simcloud@sha256:abc", wantErr: `reference "registry.example/simcloud@sha256:abc"`},
		{name: "empty", ref: "", wantErr: `reference ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := imageref.Parse(tt.ref, tt.allowTags)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tt.ref, err, tt.wantErr)
				}
				if got := errors.Is(err, imageref.ErrTagRefused); got != tt.wantTagRefused {
					t.Errorf("errors.Is(%v, ErrTagRefused) = %v, want %v", err, got, tt.wantTagRefused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.ref, err)
			}
			if _, isDigest := ref.(name.Digest); isDigest != tt.wantDigest {
				t.Errorf("Parse(%q) = %T, want a digest: %v", tt.ref, ref, tt.wantDigest)
			}
			if ref.String() != tt.ref {
				t.Errorf("Parse(%q).String() = %q", tt.ref, ref.String())
			}
		})
	}
}
