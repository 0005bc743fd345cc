package seccomp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// MetaCall names the metadata calls RunnerRules.NotifyMetadata hands to a
// listener: every call that changes a file's mode, owner, extended
// attributes or times, which no Landlock right covers.
type MetaCall uint8

const (
	MetaOther MetaCall = iota
	MetaChmod
	MetaFchmod
	MetaFchmodat
	MetaFchmodat2
	MetaChown
	MetaFchown
	MetaLchown
	MetaFchownat
	MetaSetxattr
	MetaLsetxattr
	MetaFsetxattr
	MetaRemovexattr
	MetaLremovexattr
	MetaFremovexattr
	MetaSetxattrat
	MetaRemovexattrat
	MetaUtime
	MetaUtimes
	MetaFutimesat
	MetaUtimensat
)

func (m MetaCall) String() string {
	return [...]string{"other", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
		"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat",
		"removexattrat", "utime", "utimes", "futimesat", "utimensat"}[m]
}

// metaNative are the metadata calls of each native entry point, by number
// (arch/x86/entry/syscalls/syscall_64.tbl, whose numbers x32 shares for
// all of these; include/uapi/asm-generic/unistd.h for arm64, which has no
// chmod, chown, lchown, utime, utimes or futimesat). fchmodat2 (6.6),
// setxattrat and removexattrat (6.13) have one number everywhere.
var metaNative = map[uint32]map[uint32]MetaCall{
	unix.AUDIT_ARCH_X86_64: {
		90: MetaChmod, 91: MetaFchmod, 268: MetaFchmodat, 452: MetaFchmodat2,
		92: MetaChown, 93: MetaFchown, 94: MetaLchown, 260: MetaFchownat,
		188: MetaSetxattr, 189: MetaLsetxattr, 190: MetaFsetxattr,
		197: MetaRemovexattr, 198: MetaLremovexattr, 199: MetaFremovexattr,
		463: MetaSetxattrat, 466: MetaRemovexattrat,
		132: MetaUtime, 235: MetaUtimes, 261: MetaFutimesat, 280: MetaUtimensat,
	},
	unix.AUDIT_ARCH_AARCH64: {
		52: MetaFchmod, 53: MetaFchmodat, 452: MetaFchmodat2,
		55: MetaFchown, 54: MetaFchownat,
		5: MetaSetxattr, 6: MetaLsetxattr, 7: MetaFsetxattr,
		14: MetaRemovexattr, 15: MetaLremovexattr, 16: MetaFremovexattr,
		463: MetaSetxattrat, 466: MetaRemovexattrat,
		88: MetaUtimensat,
	},
}

// metaCompat are the same calls at the 32-bit compat entry points
// (syscall_32.tbl; arch/arm/tools/syscall.tbl), the 16-bit-uid chown
// family and the time64 utimensat included. A checker would have to read
// 32-bit structures there: these are refused (EPERM) instead, so a 32-bit
// program under a filesystem rule in subreaper mode cannot change
// metadata at all.
var metaCompat = map[uint32][]uint32{
	unix.AUDIT_ARCH_I386: {15, 94, 306, 452, 16, 95, 182, 198, 207, 212, 298,
		226, 227, 228, 235, 236, 237, 463, 466, 30, 271, 299, 320, 412},
	unix.AUDIT_ARCH_ARM: {15, 94, 333, 452, 16, 95, 182, 198, 207, 212, 325,
		226, 227, 228, 235, 236, 237, 463, 466, 30, 269, 326, 348, 412},
}

// Metadata tells which metadata call d is, at the native entry point (x32
// included); MetaOther for anything else, the compat entry points
// included (the filter refuses their metadata calls itself).
func (d Data) Metadata() MetaCall {
	p, err := platformFor(runtime.GOARCH)
	if err != nil || d.Arch != p.native.audit {
		return MetaOther
	}
	nr := uint32(d.Nr)
	if p.native.nrMask != 0 {
		nr &= p.native.nrMask
	}
	return metaNative[d.Arch][nr]
}

// emitMeta lays out the metadata rules with the syscall number in the
// accumulator, which it leaves there for what follows: at the native
// entry point each call goes to the listener, at a compat one it fails
// with EPERM.
func (b block) emitMeta(a *asm) {
	var nrs []uint32
	ret := uint32(unix.SECCOMP_RET_USER_NOTIF)
	utimensat := noCall
	if calls, ok := metaNative[b.abi.audit]; ok {
		for nr, c := range calls {
			if b.report && onDescriptor(c) {
				continue
			}
			if b.report && c == MetaUtimensat {
				utimensat = nr
				continue
			}
			nrs = append(nrs, nr)
		}
	} else {
		nrs = metaCompat[b.abi.audit]
		ret = retErrno(unix.EPERM)
	}
	if len(nrs) == 0 {
		return
	}
	sortUint32(nrs) // a stable program
	hit, rest := a.label(), a.label()
	for _, nr := range nrs {
		a.jump(opJeq, nr, hit, next)
	}
	if utimensat == noCall {
		a.ja(rest)
	} else {
		// utimensat(fd, NULL, ...) is futimens: on a descriptor, left
		// alone as the f-calls are; with a path, to the listener.
		times, allow := a.label(), a.label()
		a.jump(opJeq, utimensat, times, rest)
		a.bind(times)
		lo, hi := argOffsets(b.abi, 1)
		a.stmt(opLd, lo)
		a.jump(opJeq, 0, next, hit)
		a.stmt(opLd, hi)
		a.jump(opJeq, 0, allow, hit)
		a.bind(allow)
		a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
	}
	a.bind(hit)
	a.stmt(opRet, ret)
	a.bind(rest)
}

// onDescriptor: the call changes the file a descriptor names, not one a
// path names. Under RunnerRules.ReportFS these run untouched: a
// descriptor open for writing was opened where writing is allowed (an
// open elsewhere was refused, and named), and tar -x, which sets each
// file's mode, owner and times on its descriptor, pays nothing for them.
func onDescriptor(c MetaCall) bool {
	switch c {
	case MetaFchmod, MetaFchown, MetaFsetxattr, MetaFremovexattr:
		return true
	}
	return false
}

func sortUint32(s []uint32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// The inode flags (chattr's: append-only, no-dump, no-atime, the
// project id...) are metadata too, changed by ioctl on a descriptor or by
// file_setattr (6.17) on a path, and no Landlock right covers them
// either. The checker does not make these calls for the runner: under
// NotifyMetadata they fail with EPERM wherever they aim, a writable path
// included — tools treat EPERM here as "not allowed" (chattr, xfs_io),
// and a run that needs chattr has a namespace mode, where a read-only
// mount refuses them outside the writable paths and nothing else.
const (
	fsIocSetflags   = 0x40086602 // FS_IOC_SETFLAGS, _IOW('f', 2, long)
	fsIoc32Setflags = 0x40046602 // FS_IOC32_SETFLAGS, _IOW('f', 2, int)
	fsIocFssetxattr = 0x401c5820 // FS_IOC_FSSETXATTR, _IOW('X', 32, struct fsxattr)
	fileSetattr     = 469        // one number at every entry point
)

func attrRules(a abi) []Rule {
	var rules []Rule
	for _, nr := range a.ioctl {
		for _, req := range []uint64{fsIocSetflags, fsIoc32Setflags, fsIocFssetxattr} {
			rules = append(rules, Rule{Syscall: uintptr(nr), Match: Low32, Arg: 1, Value: req, Errno: unix.EPERM})
		}
	}
	return append(rules, Rule{Syscall: fileSetattr, Match: Always, Errno: unix.EPERM})
}
