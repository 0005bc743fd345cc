package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The write-intent filesystem calls (RunnerRules.NotifyWrites): every
// system call that creates, replaces, renames, links or removes a name,
// or opens a file for writing, goes to the listener, whose supervisor
// resolves the path once, decides on what it reached and makes the call
// itself (sandbox/internal/sockcheck, fswrite.go). A read-only open never
// does: the filter tests open's flag word (an integer argument), so
// reading pays nothing. openat2 keeps its flags in a struct the filter
// cannot read, and goes whole.

// FSCall names a write-intent filesystem call NotifyWrites hands to a
// listener.
type FSCall uint8

const (
	FSNone FSCall = iota
	FSOpen
	FSCreat
	FSOpenat
	FSOpenat2
	FSMkdir
	FSMkdirat
	FSMknod
	FSMknodat
	FSRename
	FSRenameat
	FSRenameat2
	FSLink
	FSLinkat
	FSSymlink
	FSSymlinkat
	FSUnlink
	FSRmdir
	FSUnlinkat
	FSTruncate
)

func (c FSCall) String() string {
	return [...]string{"", "open", "creat", "openat", "openat2", "mkdir", "mkdirat", "mknod", "mknodat",
		"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink", "rmdir", "unlinkat", "truncate"}[c]
}

// fsTable is the numbers of the write-intent calls at one entry point;
// route: the supervisor makes them (native), or they are refused with
// EACCES (a compat entry point, whose 32-bit layouts, truncate64's split
// length among them, the supervisor does not read).
type fsTable struct {
	route bool
	calls map[uint32]FSCall
}

// The numbers come from arch/x86/entry/syscalls/syscall_64.tbl (x32
// shares each of these with x86_64: they are "common"), syscall_32.tbl,
// include/uapi/asm-generic/unistd.h and arch/arm/tools/syscall.tbl.
var fsTables = map[string]map[uint32]fsTable{
	"amd64": {
		unix.AUDIT_ARCH_X86_64: {route: true, calls: map[uint32]FSCall{
			2: FSOpen, 85: FSCreat, 257: FSOpenat, 437: FSOpenat2,
			83: FSMkdir, 258: FSMkdirat, 133: FSMknod, 259: FSMknodat,
			82: FSRename, 264: FSRenameat, 316: FSRenameat2,
			86: FSLink, 265: FSLinkat, 88: FSSymlink, 266: FSSymlinkat,
			87: FSUnlink, 84: FSRmdir, 263: FSUnlinkat, 76: FSTruncate,
		}},
		unix.AUDIT_ARCH_I386: {calls: map[uint32]FSCall{
			5: FSOpen, 8: FSCreat, 295: FSOpenat, 437: FSOpenat2,
			39: FSMkdir, 296: FSMkdirat, 14: FSMknod, 297: FSMknodat,
			38: FSRename, 302: FSRenameat, 353: FSRenameat2,
			9: FSLink, 303: FSLinkat, 83: FSSymlink, 304: FSSymlinkat,
			10: FSUnlink, 40: FSRmdir, 301: FSUnlinkat, 92: FSTruncate, 193: FSTruncate,
		}},
	},
	"arm64": {
		unix.AUDIT_ARCH_AARCH64: {route: true, calls: map[uint32]FSCall{
			56: FSOpenat, 437: FSOpenat2, 34: FSMkdirat, 33: FSMknodat,
			38: FSRenameat, 276: FSRenameat2, 37: FSLinkat, 36: FSSymlinkat,
			35: FSUnlinkat, 45: FSTruncate,
		}},
		unix.AUDIT_ARCH_ARM: {calls: map[uint32]FSCall{
			5: FSOpen, 8: FSCreat, 322: FSOpenat, 437: FSOpenat2,
			39: FSMkdir, 323: FSMkdirat, 14: FSMknod, 324: FSMknodat,
			38: FSRename, 329: FSRenameat, 382: FSRenameat2,
			9: FSLink, 330: FSLinkat, 83: FSSymlink, 331: FSSymlinkat,
			10: FSUnlink, 40: FSRmdir, 328: FSUnlinkat, 92: FSTruncate, 193: FSTruncate,
		}},
	},
}

// WriteFlags are the open flags that make an open a write: a read-only
// open (none of them) is never notified. O_TMPFILE needs O_WRONLY or
// O_RDWR, so it is among them.
const WriteFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC

// FSCall tells which write-intent call d is, at a routed entry point
// (FSNone for any other call, or one of a compat entry point, which the
// filter refuses).
func (d Data) FSCall() FSCall {
	tabs := fsTables[runtime.GOARCH]
	t, ok := tabs[d.Arch]
	if !ok || !t.route {
		return FSNone
	}
	nr := uint32(d.Nr)
	if d.Arch == unix.AUDIT_ARCH_X86_64 {
		nr &^= x32Bit
	}
	return t.calls[nr]
}

// emitWrites lays out the write-intent rules with the (masked) syscall
// number in the accumulator; a call they do not concern falls through
// with it still there.
func (b block) emitWrites(a *asm) {
	var t fsTable
	ok := false
	for _, tabs := range fsTables {
		if t, ok = tabs[b.abi.audit]; ok {
			break
		}
	}
	if !ok {
		return
	}
	hit := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if !t.route {
		hit = retErrno(unix.EACCES)
	}
	var plain, opens []uint32
	openArg := map[uint32]int{}
	for nr, c := range t.calls {
		switch c {
		case FSOpen:
			opens, openArg[nr] = append(opens, nr), 1
		case FSOpenat:
			opens, openArg[nr] = append(opens, nr), 2
		default:
			plain = append(plain, nr)
		}
	}
	sortU32(plain)
	sortU32(opens)
	notify, rest, allow := a.label(), a.label(), a.label()
	for _, nr := range plain {
		a.jump(opJeq, nr, notify, next)
	}
	openAt := make([]int, len(opens))
	for i, nr := range opens {
		openAt[i] = a.label()
		a.jump(opJeq, nr, openAt[i], next)
	}
	a.ja(rest)
	for i, nr := range opens {
		a.bind(openAt[i])
		lo, _ := argOffsets(b.abi, openArg[nr])
		a.stmt(opLd, lo)
		a.jump(opJset, WriteFlags, notify, allow)
	}
	a.bind(notify)
	a.stmt(opRet, hit)
	a.bind(allow)
	a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
	a.bind(rest)
}

func sortU32(s []uint32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// notifAddfd is struct seccomp_notif_addfd.
type notifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

// SECCOMP_IOCTL_NOTIF_ADDFD: _IOW('!', 3, struct seccomp_notif_addfd),
// the same on amd64 and arm64.
const ioctlNotifAddfd = 0x40182103

// AnswerWithFD installs a copy of fd in the caller of notification id
// (at its lowest free number, close-on-exec when cloexec) and answers
// the call with that number, in one step (SECCOMP_IOCTL_NOTIF_ADDFD with
// SECCOMP_ADDFD_FLAG_SEND, Linux 5.14): an open the supervisor made
// returns to the caller as its own. ErrGone when the caller no longer
// waits; any other error (EMFILE: the caller's table is full) is the
// call's to return.
//
// The calling goroutine must be locked to its thread (the checker's
// workers are): the ioctl runs with every signal blocked on it. With
// SECCOMP_ADDFD_FLAG_SEND the kernel marks the notification replied
// before it waits for the target to take the descriptor; a signal to
// this thread meanwhile (the Go runtime's SIGURG preemption, every 10 ms
// or so) ends that wait, the request is withdrawn, and the target's call
// returns 0 with no descriptor installed: an open that "succeeds" as fd 0.
// tar -x under --writable met it after a few thousand files. Blocked, a
// signal waits on the thread until the mask is put back.
func AnswerWithFD(listener int, id uint64, fd int, cloexec bool) (int, error) {
	r := notifAddfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, Srcfd: uint32(fd)}
	if cloexec {
		r.NewfdFlags = unix.O_CLOEXEC
	}
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old); err != nil {
		return -1, fmt.Errorf("block signals for the seccomp notification add fd: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	for {
		n, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), ioctlNotifAddfd, uintptr(unsafe.Pointer(&r)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return -1, ErrGone
		}
		return -1, fmt.Errorf("seccomp notification add fd: %w", e)
	}
}

// AddfdSendMissing names what this kernel lacks for the checked writes
// (AnswerWithFD: SECCOMP_ADDFD_FLAG_SEND, Linux 5.14), or "". The flag
// cannot be tried without a pending notification, so the kernel's
// release decides: before 5.14 the ioctl refuses it with EINVAL, and a
// checked open could never be answered.
func AddfdSendMissing() string {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return ""
	}
	if !releaseAtLeast(unix.ByteSliceToString(uts.Release[:]), 5, 14) {
		return "SECCOMP_ADDFD_FLAG_SEND (Linux 5.14)"
	}
	return ""
}

// releaseAtLeast reports whether a kernel release string ("6.18.44-fc",
// "5.10.0-28-amd64") is at least major.minor; one it cannot read counts
// as new enough (the ioctl then says for itself).
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}
