package proc

import "os"

// Functions only tests use, kept beside the package they test.

// NamespaceFile reports whether the mount is a namespace file bound onto
// a path (nsfs: what ip netns add, podman, CNI and systemd's
// PrivateNetwork leave behind). Its Root is not a path, so a caller that
// needs one skips the entry; its MountPoint is an ordinary path.
func (e MountEntry) NamespaceFile() bool { return isNamespaceRoot(e.Root) }

// Stat implements Source.
func (t Table) Stat(pid int) (Stat, error) {
	st, ok := t[pid]
	if !ok {
		return Stat{}, os.ErrNotExist
	}
	return st, nil
}
