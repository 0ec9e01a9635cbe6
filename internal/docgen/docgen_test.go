package docgen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsCurrent: the committed docs/reference is what the code
// generates now, so the reference never lags the code it documents.
func TestReferenceIsCurrent(t *testing.T) {
	pages, err := Pages()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		path := filepath.Join(Dir, p.Name)
		committed, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil || !bytes.Equal(committed, p.Content) {
			t.Errorf("%s is stale: run make docs", path)
		}
	}
}
