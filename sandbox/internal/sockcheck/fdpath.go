package sockcheck

import (
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/seccomp"
	"golang.org/x/sys/unix"
)

// throughFD tells a folder that the caller names through one of its own
// descriptors, /proc/PID/fd/N/REST (PID the caller's, after selfPath),
// as Bun's mkdir -p does (an O_PATH open of the parent, then
// mkdir("/proc/self/fd/12/name"): Claude Code's temp folders). The kernel
// follows the descriptor's magic link there; the checker resolves with
// RESOLVE_NO_MAGICLINKS and, in another process's /proc, could not follow
// it as the caller's anyway: such a call failed with ELOOP. It returns a
// duplicate of the caller's descriptor N and REST ("." when empty), to be
// resolved from it as openat(N, REST) would be; ok is false for any other
// folder, which is then resolved as before.
func (c *Checker) throughFD(f *fsCall, dir string) (fd int, rest string, ok bool, e unix.Errno) {
	tail, found := strings.CutPrefix(dir, "/proc/")
	if !found {
		return -1, "", false, 0
	}
	parts := strings.SplitN(tail, "/", 6)
	tgid, err := threadGroupOf(f.cl.tid)
	if err != nil || len(parts) < 3 || parts[0] != strconv.Itoa(tgid) {
		return -1, "", false, 0
	}
	parts = parts[1:]
	if parts[0] == "task" {
		// Only the calling thread's own folder: another thread may have
		// a descriptor table of its own (CLONE_FILES not shared).
		if len(parts) < 4 || parts[1] != strconv.Itoa(f.cl.tid) {
			return -1, "", false, 0
		}
		parts = parts[2:]
	}
	if parts[0] != "fd" || len(parts) < 2 {
		return -1, "", false, 0
	}
	num, err := strconv.Atoi(parts[1])
	if err != nil || num < 0 || strconv.Itoa(num) != parts[1] {
		return -1, "", false, 0
	}
	rest = strings.Join(parts[2:], "/")
	if strings.Trim(rest, "/") == "" {
		rest = "."
	}
	var dup int
	if werr := f.cl.w.withOwn(func() {
		if e = c.pidfdOf(f); e == 0 {
			dup, err = seccomp.GetFD(f.pidfd, num)
		}
	}); werr != nil || e != 0 || err != nil {
		if e == gone {
			return -1, "", true, gone
		}
		return -1, "", true, unix.ENOENT // no such descriptor: no such entry in /proc
	}
	return dup, rest, true, 0
}

// procFDThrough tells a path that goes through one of the caller's own
// descriptors as the metadata calls see it (chmod("/proc/self/fd/N/f"),
// as throughFD for the writes): N and the rest, relative to it ("." when
// empty); ok is false for any other path, and for N alone (procFD's).
func procFDThrough(path string) (n int, rest string, ok bool) {
	for _, p := range []string{"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"} {
		tail, found := strings.CutPrefix(path, p)
		if !found {
			continue
		}
		num, rest, found := strings.Cut(tail, "/")
		n, err := strconv.Atoi(num)
		if !found || err != nil || n < 0 || strconv.Itoa(n) != num {
			return -1, "", false
		}
		if strings.Trim(rest, "/") == "" {
			rest = "."
		}
		return n, rest, true
	}
	return -1, "", false
}
