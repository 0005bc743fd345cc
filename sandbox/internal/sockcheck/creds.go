package sockcheck

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// A call the checker makes for the runner carries the runner's
// privileges, never corral's (SPEC, Privileges; DESIGN.md "A call made
// for the runner carries the runner's privileges"): corral as root, or
// the pidns init, holds capabilities the runner does not, and a bind
// below 1024, a chown or a DAC override made with them would lend them
// to the runner.
//
// Each worker owns its OS thread (runtime.LockOSThread, from New on, never
// unlocked), so per-thread credentials are the worker's alone: before it
// acts on the runner's objects it takes on the calling thread's fsuid,
// fsgid, supplementary groups and umask and lowers its effective
// capabilities to the caller's, and afterwards it takes its own back.
// Each is a raw per-thread system call (setfsuid, setfsgid, setgroups,
// capset, umask), never Go's syscall.Setuid family, which applies to every
// thread of the process. The permitted set is left alone: the effective
// set can always be raised back within it. The umask is per-thread once
// the worker's thread has its own fs_struct (unshare(CLONE_FS) in New,
// before the runner exists).
//
// The caller's credentials are read from /proc/TID/status while its call
// is pending: a thread's credentials change only by its own calls (a
// setuid, a capset, an execve), and it is suspended in this one, so what
// is read is what it holds for this call. They are read at each
// notification, never cached by tid: a runner may drop privileges between
// calls (with --cap-add, setuid to another uid), and a stale cache would
// lend it what it gave up. The one exception is Policy.StaticCreds (no
// capability kept, no_new_privs): then no thread of the tree can change
// its credentials at all — no capability to setuid, setgroups or raise a
// capset, no setuid or file-capability execve — and the first read holds
// for every call of the run (reading the file costs some 15 µs here).

// creds are the credentials a call is made with.
type creds struct {
	fsuid, fsgid int
	groups       []int
	capEff       uint64
	umask        int // -1: unknown (a kernel before 4.7 does not say)
}

// callerCreds are the credentials of the thread of notification n (see
// above for Policy.StaticCreds). Check that n is still pending afterwards:
// only then was its tid the caller's. The credentials kept for every
// later call are kept only once that check is made here: a caller killed
// before the read, its tid gone to another process of the host, would
// otherwise lend that process's credentials to the whole run.
func (c *Checker) callerCreds(w *workerState, n *seccomp.Notif) (*creds, error) {
	if cr := c.static.Load(); cr != nil {
		return cr, nil
	}
	cr, err := w.readCreds("/proc/" + strconv.Itoa(int(n.Pid)) + "/status")
	if err != nil {
		return nil, err
	}
	if c.pol.StaticCreds && c.valid(n) {
		c.static.CompareAndSwap(nil, &cr)
	}
	return &cr, nil
}

// readCreds parses the credentials out of a /proc status file, read into
// the worker's buffer with one read (a status file is some 1.5 KiB).
func (w *workerState) readCreds(path string) (creds, error) {
	cr := creds{umask: -1}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return cr, err
	}
	if w.status == nil {
		w.status = make([]byte, 8192)
	}
	n, err := unix.Read(fd, w.status)
	unix.Close(fd)
	if err != nil {
		return cr, err
	}
	if n == len(w.status) {
		return cr, fmt.Errorf("%s: longer than %d bytes", path, len(w.status))
	}
	data := w.status[:n]
	var got int
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		fields := bytes.Fields(val)
		switch string(key) {
		case "Umask":
			if len(fields) == 1 {
				if v, err := strconv.ParseUint(string(fields[0]), 8, 32); err == nil {
					cr.umask = int(v)
				}
			}
		case "Uid", "Gid":
			// real, effective, saved, filesystem
			if len(fields) != 4 {
				return cr, fmt.Errorf("%s: %s: %q", path, key, val)
			}
			v, err := strconv.ParseUint(string(fields[3]), 10, 32)
			if err != nil {
				return cr, fmt.Errorf("%s: %s: %w", path, key, err)
			}
			if key[0] == 'U' {
				cr.fsuid = int(v)
			} else {
				cr.fsgid = int(v)
			}
			got++
		case "Groups":
			cr.groups = make([]int, 0, len(fields))
			for _, f := range fields {
				v, err := strconv.ParseUint(string(f), 10, 32)
				if err != nil {
					return cr, fmt.Errorf("%s: Groups: %w", path, err)
				}
				cr.groups = append(cr.groups, int(v))
			}
			got++
		case "CapEff":
			if len(fields) != 1 {
				return cr, fmt.Errorf("%s: CapEff: %q", path, val)
			}
			v, err := strconv.ParseUint(string(fields[0]), 16, 64)
			if err != nil {
				return cr, fmt.Errorf("%s: CapEff: %w", path, err)
			}
			cr.capEff = v
			got++
		}
	}
	if got != 4 {
		return cr, fmt.Errorf("%s: no Uid, Gid, Groups or CapEff", path)
	}
	slices.Sort(cr.groups)
	return cr, nil
}

// asCaller makes the worker's thread act with cr, its caller's
// credentials, until asSelf. Every step is checked; an error leaves the
// thread as asSelf puts it back, and the call must be refused.
func (w *workerState) asCaller(cr *creds) error {
	w.changed, w.caller = true, cr
	if !slices.Equal(cr.groups, w.own.groups) {
		w.groupsChanged = true
		if err := setGroups(cr.groups); err != nil {
			return err
		}
	}
	w.idsChanged = cr.fsgid != w.own.fsgid || cr.fsuid != w.own.fsuid
	if cr.fsgid != w.own.fsgid {
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(cr.fsgid), 0, 0)
		// setfsgid says no error: the value now in force tells.
		if now, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); int(now) != cr.fsgid {
			return fmt.Errorf("setfsgid %d: refused", cr.fsgid)
		}
	}
	if cr.fsuid != w.own.fsuid {
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(cr.fsuid), 0, 0)
		if now, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(now) != cr.fsuid {
			return fmt.Errorf("setfsuid %d: refused", cr.fsuid)
		}
	}
	if cr.umask >= 0 && w.fsOwn && cr.umask != w.own.umask {
		w.umaskChanged = true
		unix.RawSyscall(unix.SYS_UMASK, uintptr(cr.umask), 0, 0)
	}
	// Last: lowering the effective set ends what the steps above needed
	// (CAP_SETUID, CAP_SETGID). setfsuid away from 0 has already cleared
	// the file capabilities from it; this sets exactly the caller's,
	// within the worker's permitted set.
	if eff := cr.capEff & w.permitted; eff != w.own.capEff {
		w.capsChanged = true
		if err := w.setEffective(eff); err != nil {
			return err
		}
	}
	return nil
}

// createMode is the mode to create a file or folder with for the caller:
// as asked, where the thread takes the caller's umask itself. Where it
// cannot (unshare(CLONE_FS) refused, as Docker's default seccomp profile
// refuses unshare to a container without CAP_SYS_ADMIN, so the thread
// shares corral's umask), the caller's umask is applied here: the kernel
// then applies corral's on top, so the file is never more open than the
// runner asked (umask 077 before a key is written gives 0600), and is
// exactly that whenever corral's umask is within the runner's (the usual
// case: the runner inherits it, or tightens it).
// Called as the caller (after asCaller).
func (w *workerState) createMode(mode uint32) uint32 {
	if w.fsOwn || w.caller == nil || w.caller.umask < 0 {
		return mode
	}
	return mode &^ uint32(w.caller.umask)
}

// asSelf gives the worker's thread its own credentials back. Should the
// kernel refuse (it has no reason to), the worker's thread is no longer
// one to check with: the error ends the worker, and its thread with it (a
// goroutine locked to its thread that returns takes the thread along).
func (w *workerState) asSelf() (err error) {
	if w.broken != nil {
		return w.broken
	}
	if !w.changed {
		return nil
	}
	w.changed = false
	defer func() { w.broken = err }()
	// First: the effective set back (within the permitted set, always
	// allowed), which the steps below need. Each step undoes what
	// asCaller did, and only that.
	if w.capsChanged {
		w.capsChanged = false
		if err := w.setEffective(w.own.capEff); err != nil {
			return err
		}
	}
	if w.umaskChanged {
		w.umaskChanged = false
		unix.RawSyscall(unix.SYS_UMASK, uintptr(w.own.umask), 0, 0)
	}
	if w.groupsChanged {
		w.groupsChanged = false
		if err := setGroups(w.own.groups); err != nil {
			return err
		}
	}
	if w.idsChanged {
		w.idsChanged = false
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(w.own.fsuid), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(w.own.fsgid), 0, 0)
		fsuid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
		fsgid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
		if int(fsuid) != w.own.fsuid || int(fsgid) != w.own.fsgid {
			return fmt.Errorf("sockcheck: the worker's fsuid %d and fsgid %d could not be put back to %d and %d", fsuid, fsgid, w.own.fsuid, w.own.fsgid)
		}
	}
	return nil
}

// withOwn runs f with the worker's own credentials, between calls made as
// the caller (asCaller), whose credentials it takes on again afterwards.
func (w *workerState) withOwn(f func()) error {
	cr := w.caller
	if !w.changed || cr == nil {
		f()
		return nil
	}
	if err := w.asSelf(); err != nil {
		return err
	}
	f()
	return w.asCaller(cr)
}

// setGroups sets the calling thread's supplementary groups, this thread's
// only (the raw call; Go's syscall.Setgroups applies to every thread).
func setGroups(groups []int) error {
	gids := make([]uint32, len(groups))
	for i, g := range groups {
		gids[i] = uint32(g)
	}
	var p unsafe.Pointer
	if len(gids) > 0 {
		p = unsafe.Pointer(&gids[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	return nil
}

// setEffective sets the thread's effective capabilities to eff, its
// permitted and inheritable sets unchanged.
func (w *workerState) setEffective(eff uint64) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(eff), Permitted: uint32(w.permitted), Inheritable: uint32(w.inheritable)},
		{Effective: uint32(eff >> 32), Permitted: uint32(w.permitted >> 32), Inheritable: uint32(w.inheritable >> 32)},
	}
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}

// initCreds records the worker thread's own credentials, and gives the
// thread an fs_struct of its own, so that a umask set on it is its own
// (unshare(CLONE_FS): the thread stays locked for its whole life, and
// the Go runtime never runs another goroutine on it).
func (w *workerState) initCreds() error {
	if err := unix.Unshare(unix.CLONE_FS); err == nil {
		w.fsOwn = true
	}
	own, err := w.readCreds("/proc/thread-self/status")
	if err != nil {
		return fmt.Errorf("sockcheck: the checker's own credentials: %w", err)
	}
	w.own = own
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("sockcheck: capget: %w", e)
	}
	w.permitted = uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32
	w.inheritable = uint64(data[0].Inheritable) | uint64(data[1].Inheritable)<<32
	w.own.capEff = uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	return nil
}
