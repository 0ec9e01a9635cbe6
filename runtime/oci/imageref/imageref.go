// Package imageref parses the module image references the CCM accepts.
// It is apart from runtime/oci, the registry client, so that the
// cloud-config (runtime/cloudconfig) can check a reference without
// linking that client.
package imageref

import (
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrTagRefused is returned for a reference without a digest when tags are
// not allowed.
var ErrTagRefused = errors.New("reference has no digest")

// Parse parses ref, refusing a reference without a digest unless
// allowTags.
func Parse(ref string, allowTags bool) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w", ref, err)
	}
	if _, ok := r.(name.Digest); !ok && !allowTags {
		return nil, fmt.Errorf("%w: %q can change under the same name; pin it as %s@sha256:<digest> (wasmccm push prints it), or allow tags",
			ErrTagRefused, ref, r.Context())
	}
	return r, nil
}
