package ociconfig

import (
	"fmt"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The parts of a config.json that the sandbox policy can honour. A
// container's root filesystem is a directory corral never pivots into; the
// one root it can give is the caller's own, "/", and root.readonly then
// means what --read-only means (Landlock: nothing writable but the usual
// devices).

// root translates root; raw is the decoded object, to tell an absent
// field from its zero value.
func (c *File) root(r *specs.Root, raw map[string]any) error {
	if !has(raw, "path") {
		return &Error{Path: "root.path", Reason: `missing: corral runs the runner in the caller's root filesystem; write "/"`}
	}
	if filepath.Clean(r.Path) != "/" {
		return &Error{Path: "root.path", Unsupported: true,
			Reason: fmt.Sprintf(`%q: corral runs the runner in the caller's root filesystem, so only "/" is accepted (root.readonly makes it read-only)`, r.Path)}
	}
	c.ReadOnly = r.Readonly
	return nil
}
