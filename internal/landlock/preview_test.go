package landlock

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Preview must answer as Restrict would, and leave the process as free as
// it was: the same process can still write where the policy would forbid.
func TestPreview(t *testing.T) {
	requireLandlock(t, 1)
	root := tree(t, "w/", "s/secret", "t/file")
	p := Policy{Writable: []string{filepath.Join(root, "w")}, Hide: []string{filepath.Join(root, "s")}}
	rep, err := Preview(p)
	if err != nil {
		t.Fatal(err)
	}
	abi, _ := ABI()
	if rep.ABI != abi || !slices.Contains(rep.FS, "write_file") || rep.Rules == 0 {
		t.Errorf("Preview: %+v, want ABI %d, write_file handled, rules planned", rep, abi)
	}
	real, _ := filepath.EvalSymlinks(root)
	if !slices.Contains(rep.Split, real) {
		t.Errorf("Preview split %q, want it to name %s (the parent of the hidden path)", rep.Split, real)
	}
	if err := os.WriteFile(filepath.Join(root, "t", "after"), nil, 0o644); err != nil {
		t.Errorf("Preview restricted the calling process: %v", err)
	}

	if rep, err := Preview(Policy{}); err != nil || rep.ABI != 0 {
		t.Errorf("Preview of the zero Policy: %+v, %v; want a zero Report", rep, err)
	}
	var pe *PolicyError
	if _, err := Preview(Policy{Writable: []string{filepath.Join(root, "missing")}}); !errors.As(err, &pe) {
		t.Errorf("Preview of a missing path: %v, want a *PolicyError", err)
	}
	if abi < 6 {
		var ae *ABIError
		if _, err := Preview(Policy{IsolateIPC: true}); !errors.As(err, &ae) {
			t.Errorf("Preview of IsolateIPC at ABI %d: %v, want an *ABIError", abi, err)
		}
	} else if rep, err := Preview(Policy{IsolateIPC: true}); err != nil || len(rep.Scopes) != 2 {
		t.Errorf("Preview of IsolateIPC: %+v, %v; want both scopes", rep, err)
	}
}
