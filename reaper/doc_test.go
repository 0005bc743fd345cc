package reaper

import (
	"encoding/json"
	"testing"

	"github.com/corral-sh/corral/internal/statefile"
)

func decodeDoc(t *testing.T, data []byte) statefile.Document {
	t.Helper()
	var doc statefile.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("state %q: %v", data, err)
	}
	return doc
}
