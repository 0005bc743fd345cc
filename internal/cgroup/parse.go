package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-sh/corral/internal/proc"
)

// errMalformed marks input from /proc or a cgroup file that does not have
// the shape the kernel gives it: it is refused, never guessed at.
var errMalformed = errors.New("malformed")

// mount is one line of /proc/self/mountinfo, reduced to what choosing a
// cgroup2 mount needs.
type mount struct {
	root     string // the path inside the filesystem that is mounted
	point    string // where it is mounted
	fstype   string
	readOnly bool // from the per-mount or the superblock options
}

// parseMountinfo parses the cgroup2 lines of /proc/self/mountinfo
// (proc(5)); lines of other filesystems are not looked at, which keeps a
// Kubernetes node's thousand mounts cheap. A line reads:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// The optional fields (master:1 …) end at a lone "-"; the paths are
// octal-escaped (\040 for a space, \134 for a backslash). A line that does
// not have that shape makes the whole file an error: a mount table read
// half right could name the wrong directory.
func parseMountinfo(data []byte) ([]mount, error) {
	var mounts []mount
	for n, line := range bytes.Split(data, []byte("\n")) {
		// The fstype follows " - ", and no escaped path holds a space.
		if len(line) == 0 || !bytes.Contains(line, []byte(" - cgroup2 ")) {
			continue
		}
		e, err := proc.ParseMountLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %v", n+1, errMalformed, err)
		}
		mounts = append(mounts, mount{root: e.Root, point: e.MountPoint, fstype: e.FSType, readOnly: e.ReadOnly()})
	}
	return mounts, nil
}

// parseProcCgroup returns the cgroup v2 path from /proc/self/cgroup
// (cgroups(7)): the one line "0::PATH" among the v1 lines
// "ID:CONTROLLERS:PATH" a hybrid layout adds. found is false when there is
// no v2 line (a v1-only system).
//
// The kernel prints cgroup names unescaped, and a name may hold a newline
// or a colon: a second "0::" line therefore means a name forged one, and
// the file is refused rather than a line picked. A path outside the
// caller's cgroup namespace reads "/../…"; it is refused too, since no
// mount the caller can see reaches it.
func parseProcCgroup(data []byte) (path string, found bool, err error) {
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		id, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return "", false, fmt.Errorf("/proc/self/cgroup line %d: %w: no \":\"", n+1, errMalformed)
		}
		controllers, p, ok := bytes.Cut(rest, []byte(":"))
		if !ok {
			return "", false, fmt.Errorf("/proc/self/cgroup line %d: %w: want ID:CONTROLLERS:PATH", n+1, errMalformed)
		}
		if string(id) != "0" || len(controllers) != 0 {
			continue
		}
		if found {
			return "", false, fmt.Errorf("/proc/self/cgroup: %w: two cgroup v2 (0::) lines", errMalformed)
		}
		found = true
		path = string(p)
	}
	if !found {
		return "", false, nil
	}
	if err := checkCgroupPath(path); err != nil {
		return "", false, fmt.Errorf("/proc/self/cgroup: %w", err)
	}
	return path, true, nil
}

// checkCgroupPath accepts a clean absolute path, as the kernel prints one
// for a cgroup inside the caller's namespace.
func checkCgroupPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: cgroup path %q is not absolute", errMalformed, p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: cgroup path %q holds a NUL", errMalformed, p)
	}
	if p == "/" {
		return nil
	}
	for c := range strings.SplitSeq(p[1:], "/") {
		switch c {
		case "", ".":
			return fmt.Errorf("%w: cgroup path %q is not clean", errMalformed, p)
		case "..":
			return fmt.Errorf("%w: cgroup path %q lies outside this cgroup namespace", errMalformed, p)
		}
	}
	return nil
}

// parseEvents returns the "populated" value of a cgroup.events file
// ("populated 1\nfrozen 0\n"). Other keys are ignored: later kernels may
// add some.
func parseEvents(data []byte) (bool, error) {
	found, populated := false, false
	// A plain loop, not bytes.SplitSeq: its closures make data escape,
	// and Populated's buffer should stay on the stack.
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		key, value, ok := bytes.Cut(line, []byte(" "))
		if !ok || string(key) != "populated" {
			continue
		}
		if found {
			return false, fmt.Errorf("cgroup.events: %w: two populated lines", errMalformed)
		}
		switch string(value) {
		case "0":
		case "1":
			populated = true
		default:
			return false, fmt.Errorf("cgroup.events: %w: populated %q", errMalformed, string(value))
		}
		found = true
	}
	if !found {
		return false, fmt.Errorf("cgroup.events: %w: no populated line", errMalformed)
	}
	return populated, nil
}

// parseProcs appends the pids of a cgroup.procs file (one decimal pid a
// line) to buf. Anything else makes the whole list an error: a pid read
// half right could name another process.
func parseProcs(data []byte, buf []int) ([]int, error) {
	n := len(buf)
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		pid := 0
		for _, b := range line {
			if b < '0' || b > '9' || pid > 1<<30 {
				return buf[:n], fmt.Errorf("cgroup.procs: %w: line %q", errMalformed, line)
			}
			pid = pid*10 + int(b-'0')
		}
		if pid <= 0 {
			return buf[:n], fmt.Errorf("cgroup.procs: %w: line %q", errMalformed, line)
		}
		buf = append(buf, pid)
	}
	return buf, nil
}
