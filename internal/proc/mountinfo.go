package proc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// UnescapeMountField undoes the kernel's mangling of a path or name in
// /proc/PID/mountinfo: a space, tab, newline or backslash is written as a
// backslash and three octal digits (fs/proc_namespace.c, mangle()).
// A truncated or non-octal escape, or one beyond a byte, is an error.
func UnescapeMountField(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("mountinfo field %q ends inside an escape", s)
		}
		v := 0
		for _, c := range s[i+1 : i+4] {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("mountinfo field %q has a bad escape %q", s, s[i:i+4])
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("mountinfo field %q has an escape beyond a byte", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// MountEntry is one line of /proc/PID/mountinfo (proc(5)).
type MountEntry struct {
	ID, Parent int
	// Root is the path inside the filesystem that is mounted here, except
	// for a namespace file (see NamespaceFile), where it is the name the
	// kernel gives the namespace, such as "net:[4026532182]": no path.
	Root         string
	MountPoint   string
	Options      []string // per mount: rw or ro, nosuid, nodev, noexec, ...
	FSType       string
	Source       string
	SuperOptions []string // per filesystem: for proc, hidepid=, subset=, gid=
}

// ReadOnly reports whether the mount or its filesystem is read-only.
func (e MountEntry) ReadOnly() bool {
	return slices.Contains(e.Options, "ro") || slices.Contains(e.SuperOptions, "ro")
}

// isNamespaceRoot matches what nsfs shows as a mount's root
// (fs/nsfs.c, nsfs_show_path: "%s:[%lu]", the namespace type and the
// inode number): "net:[4026532182]", "mnt:[4026531841]".
func isNamespaceRoot(s string) bool {
	name, rest, ok := strings.Cut(s, ":[")
	if !ok || name == "" || !strings.HasSuffix(rest, "]") {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	ino := rest[:len(rest)-1]
	if ino == "" {
		return false
	}
	for _, c := range ino {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseMountLine parses one line of mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields are separated by exactly one space (the kernel escapes spaces,
// tabs and newlines in paths, but not other bytes strings.Fields would
// split on), the optional fields end at a lone "-", and the paths are
// octal-escaped. The root is an absolute path, or a namespace's name for
// a namespace file (see NamespaceFile). Anything else is an error: a mount
// table read half right could name the wrong directory.
func ParseMountLine(line string) (MountEntry, error) {
	fields := strings.Split(line, " ")
	sep := slices.Index(fields, "-")
	if sep < 6 || len(fields) != sep+4 {
		return MountEntry{}, errors.New("not the kernel's format (want 6 fields, optional fields, \"-\", 3 fields)")
	}
	var e MountEntry
	var err error
	if e.ID, err = strconv.Atoi(fields[0]); err != nil || e.ID < 0 {
		return MountEntry{}, fmt.Errorf("mount id %q is not a number", fields[0])
	}
	if e.Parent, err = strconv.Atoi(fields[1]); err != nil || e.Parent < 0 {
		return MountEntry{}, fmt.Errorf("parent id %q is not a number", fields[1])
	}
	if e.Root, err = UnescapeMountField(fields[3]); err != nil {
		return MountEntry{}, err
	}
	if e.MountPoint, err = UnescapeMountField(fields[4]); err != nil {
		return MountEntry{}, err
	}
	if !strings.HasPrefix(e.MountPoint, "/") || strings.IndexByte(e.MountPoint, 0) >= 0 {
		return MountEntry{}, fmt.Errorf("mount point %q is not absolute", e.MountPoint)
	}
	if (!strings.HasPrefix(e.Root, "/") || strings.IndexByte(e.Root, 0) >= 0) && !isNamespaceRoot(e.Root) {
		return MountEntry{}, fmt.Errorf("root %q is neither an absolute path nor a namespace file's name", e.Root)
	}
	e.Options = strings.Split(fields[5], ",")
	if e.FSType, err = UnescapeMountField(fields[sep+1]); err != nil {
		return MountEntry{}, err
	}
	if e.Source, err = UnescapeMountField(fields[sep+2]); err != nil {
		return MountEntry{}, err
	}
	e.SuperOptions = strings.Split(fields[sep+3], ",")
	return e, nil
}

// ParseMountTable parses a whole mountinfo table. A line that is not what
// the kernel writes is an error naming it: corral cannot keep restrictions
// it cannot read, so it refuses rather than guess.
func ParseMountTable(text string) ([]MountEntry, error) {
	var out []MountEntry
	for n, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		e, err := ParseMountLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ReadMountTable reads and parses the mountinfo file at path:
// /proc/self/mountinfo for the process's mount namespace, or
// /proc/thread-self/mountinfo for a thread that unshared one of its own.
func ReadMountTable(path string) ([]MountEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseMountTable(string(data))
}

// Flags are the MS_* flags of e's per-mount options (ro, nosuid, nodev,
// noexec and the atime ones): what a bind remount of it must repeat, the
// kernel refusing to clear a flag it locked.
func (e MountEntry) Flags() uintptr {
	var f uintptr
	for _, o := range e.Options {
		switch o {
		case "ro":
			f |= unix.MS_RDONLY
		case "nosuid":
			f |= unix.MS_NOSUID
		case "nodev":
			f |= unix.MS_NODEV
		case "noexec":
			f |= unix.MS_NOEXEC
		case "noatime":
			f |= unix.MS_NOATIME
		case "nodiratime":
			f |= unix.MS_NODIRATIME
		case "relatime":
			f |= unix.MS_RELATIME
		case "strictatime":
			f |= unix.MS_STRICTATIME
		}
	}
	return f
}
