package runner

// Paths as the runner's mounts and protected paths compare them: as
// Landlock resolves them (absolute, symlinks followed), and in a mount
// table read from mountinfo.

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/proc"
)

// beneath reports whether path is dir or lies inside it.
func beneath(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if beneath(path, d) {
			return true
		}
	}
	return false
}

// at is the mount the caller sees at mountPoint (the last one stacked
// there); nil: none.
func at(table []proc.MountEntry, mountPoint string) *proc.MountEntry {
	var top *proc.MountEntry
	for i := range table {
		if table[i].MountPoint == mountPoint {
			top = &table[i]
		}
	}
	return top
}

// containing is the mount path lies on in table: the one at its longest
// prefix.
func containing(table []proc.MountEntry, path string) *proc.MountEntry {
	for dir := path; ; dir = filepath.Dir(dir) {
		if e := at(table, dir); e != nil {
			return e
		}
		if dir == "/" || dir == "." {
			return nil
		}
	}
}

// canonical is path as Landlock resolves it: absolute, symlinks followed.
// A path that cannot be resolved is Landlock's to refuse (it does, before
// the runner starts).
func canonical(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	c, err := filepath.EvalSymlinks(abs)
	return c, err == nil
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
