package seccomp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// The calls of a sandbox that mounts (RunnerRules.NotifyMounts): under a
// filesystem rule Landlock refuses every mount, so a nested sandbox
// (bubblewrap, and with it codex's and Claude Code's own) cannot start,
// and says so in words of its own ("Failed to make / slave", "setting up
// uid map"). These calls go to the listener only so that corral can name
// it; the listener answers CONTINUE, and the kernel decides as it would
// have. clone(2) and unshare(2) go only with CLONE_NEWNS or
// CLONE_NEWUSER in their flag word (an integer argument the filter
// reads): a plain fork pays nothing. clone3 keeps its flags in a struct
// and is left alone. The compat entry points are left alone too.

// MountCall names a call NotifyMounts hands to a listener.
type MountCall uint8

const (
	MountNone MountCall = iota
	MountMount
	MountUmount
	MountPivotRoot
	MountUnshare
	MountClone
	MountSetattr
	MountOpenTree
	MountMove
	MountFsopen
)

func (m MountCall) String() string {
	return [...]string{"", "mount", "umount2", "pivot_root", "unshare", "clone", "mount_setattr", "open_tree", "move_mount", "fsopen"}[m]
}

// NamespaceFlags are the flags of clone(2) and unshare(2) that make a
// mount or user namespace: what a sandbox that mounts starts with.
const NamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER

// mountNative are the calls by number at each native entry point
// (arch/x86/entry/syscalls/syscall_64.tbl, whose numbers x32 shares;
// include/uapi/asm-generic/unistd.h). open_tree, move_mount and fsopen
// (5.2) and mount_setattr (5.12) have one number everywhere.
var mountNative = map[uint32]map[uint32]MountCall{
	unix.AUDIT_ARCH_X86_64: {
		165: MountMount, 166: MountUmount, 155: MountPivotRoot, 272: MountUnshare, 56: MountClone,
		442: MountSetattr, 428: MountOpenTree, 429: MountMove, 430: MountFsopen,
	},
	unix.AUDIT_ARCH_AARCH64: {
		40: MountMount, 39: MountUmount, 41: MountPivotRoot, 97: MountUnshare, 220: MountClone,
		442: MountSetattr, 428: MountOpenTree, 429: MountMove, 430: MountFsopen,
	},
}

// MountCall tells which of these calls d is, at the native entry point;
// MountNone for anything else.
func (d Data) MountCall() MountCall {
	p, err := platformFor(runtime.GOARCH)
	if err != nil || d.Arch != p.native.audit {
		return MountNone
	}
	nr := uint32(d.Nr)
	if p.native.nrMask != 0 {
		nr &= p.native.nrMask
	}
	return mountNative[d.Arch][nr]
}

// emitMounts lays out the rules with the (masked) syscall number in the
// accumulator; a call they do not concern falls through with it still
// there. clone and unshare go only with a namespace flag: their flag word
// is the first argument at both native entry points.
func (b block) emitMounts(a *asm) {
	calls, ok := mountNative[b.abi.audit]
	if !ok {
		return
	}
	var plain, flagged []uint32
	for nr, c := range calls {
		if c == MountUnshare || c == MountClone {
			flagged = append(flagged, nr)
			continue
		}
		plain = append(plain, nr)
	}
	sortU32(plain)
	sortU32(flagged)
	notify, flags, allow, rest := a.label(), a.label(), a.label(), a.label()
	for _, nr := range plain {
		a.jump(opJeq, nr, notify, next)
	}
	for _, nr := range flagged {
		a.jump(opJeq, nr, flags, next)
	}
	a.ja(rest)
	a.bind(flags)
	lo, _ := argOffsets(b.abi, 0)
	a.stmt(opLd, lo)
	a.jump(opJset, NamespaceFlags, notify, allow)
	a.bind(notify)
	a.stmt(opRet, unix.SECCOMP_RET_USER_NOTIF)
	a.bind(allow)
	a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
	a.bind(rest)
}
