package landlock

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Report says what Restrict enforced.
type Report struct {
	ABI    int
	FS     []string // filesystem rights handled (denied unless a rule grants them)
	Net    []string // network rights handled: "bind_tcp", "connect_tcp"
	Scopes []string // IPC scopes in force
	// NotEnforced names what the policy implies but this kernel's Landlock
	// cannot enforce; the rest is enforced. The caller says it once.
	NotEnforced []string
	// Notes are ways this kernel's Landlock is stricter than the policy.
	Notes []string
	// Split lists the directories that got no rights of their own because
	// a hidden path lies beneath them: they cannot be listed, nothing can
	// be created, renamed or removed directly in them, and entries that
	// appear in them after Restrict are unreachable.
	Split []string
	Rules int // landlock_add_rule calls made, filesystem and port rules
}

// UnixSocketsBeneathHidden is what Landlock up to ABI 7 cannot enforce of
// a hidden path (Report.NotEnforced): connect(2) to a path-bound socket is
// no filesystem access for it. A caller that holds those connects another
// way leaves it out of what it says.
const UnixSocketsBeneathHidden = "connecting to Unix sockets beneath hidden paths"

// Warning is NotEnforced as one line for stderr, or "".
func (r Report) Warning() string {
	if len(r.NotEnforced) == 0 {
		return ""
	}
	return fmt.Sprintf("Landlock ABI %d cannot enforce: %s; the rest of the policy is enforced", r.ABI, strings.Join(r.NotEnforced, "; "))
}

// rulesetAttr is struct landlock_ruleset_attr up to scoped (ABI 6); the
// kernel takes any prefix of at least handled_access_fs and zero-fills the
// rest, so the size passed is the smallest that holds the fields in use.
type rulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

func (a *rulesetAttr) size() uintptr {
	if a.scoped != 0 {
		return unsafe.Sizeof(*a)
	}
	if a.handledNet != 0 {
		return unsafe.Offsetof(a.scoped)
	}
	return unsafe.Offsetof(a.handledNet)
}

// ruleset decides, for a policy and an ABI, what the ruleset handles and
// what the report says. It touches nothing.
func ruleset(p Policy, abi int) (rulesetAttr, Report, error) {
	var attr rulesetAttr
	rep := Report{ABI: abi}
	k := min(abi, knownABI)
	if p.IsolateIPC {
		if scopesAt(k)&ipcScopes != ipcScopes {
			return attr, rep, &ABIError{What: "IPC isolation (signal and abstract Unix socket scopes)", Need: 6, Have: abi}
		}
		attr.scoped = ipcScopes
		rep.Scopes = names(ipcScopes, scopeNames)
	}
	if p.Net != nil {
		attr.handledNet = netRightsAt(k)
		if attr.handledNet != netBindTCP|netConnectTCP {
			return attr, rep, &ABIError{What: "TCP bind and connect rules by port", Need: 4, Have: abi}
		}
		rep.Net = names(attr.handledNet, netNames)
	}
	if p.restrictsFS() {
		attr.handledFS = fsRightsAt(k)
		rep.FS = names(attr.handledFS, fsNames)
		if attr.handledFS&fsTruncate == 0 {
			rep.NotEnforced = append(rep.NotEnforced, "truncation with truncate(2) outside the writable paths (needs ABI 3, Linux 6.2)")
		}
		if attr.handledFS&fsIoctlDev == 0 {
			rep.NotEnforced = append(rep.NotEnforced, "ioctl on device files outside the writable paths (needs ABI 5, Linux 6.10)")
		}
		if len(p.Hide) > 0 {
			// connect(2) to a path-bound socket is no filesystem access
			// for Landlock up to ABI 7.
			rep.NotEnforced = append(rep.NotEnforced, UnixSocketsBeneathHidden)
		}
		if attr.handledFS&fsRefer == 0 {
			// ABI 1 refuses every cross-directory rename and link.
			rep.Notes = append(rep.Notes, "renaming or linking a file into another directory fails everywhere with EXDEV (Landlock ABI 1; ABI 2, Linux 5.19, allows it beneath writable paths)")
		}
	}
	return attr, rep, nil
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT, and netPortAttr its struct
// landlock_net_port_attr (include/uapi/linux/landlock.h): the rights and a
// port in host byte order.
const ruleNetPort = 2

type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// Restrict enforces p on the calling OS thread and on everything it starts
// from then on; it cannot be undone. The caller must have locked its
// goroutine to the thread (runtime.LockOSThread), set no_new_privs on that
// same thread (or hold CAP_SYS_ADMIN), made every mount the command should
// see, and then execve from that thread. Corral's other threads are not
// restricted (no LANDLOCK_RESTRICT_SELF_TSYNC).
//
// Errors: a *PolicyError when p itself is wrong (see Check); an
// *UnavailableError when the kernel has no Landlock; an *ABIError when p
// needs a newer one (IsolateIPC: 6; Net: 4). A zero Policy restricts nothing and returns a zero
// Report. A right the kernel cannot enforce is no error: it is named in
// Report.NotEnforced and the rest is enforced.
//
// What Landlock does not cover, whatever the policy: stat(2), chdir(2) and
// path lookup (names beneath a hidden path can be seen to exist), files
// already open when Restrict runs (corral's stdio passes through unchanged),
// and a hard link or bind mount of a granted file placed beneath a hidden
// path (rights follow the inode).
func Restrict(p Policy) (Report, error) {
	attr, rep, pl, err := prepare(p)
	if err != nil || pl == nil {
		return rep, err
	}
	abi := rep.ABI

	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), attr.size(), 0)
	if errno != 0 {
		return rep, fmt.Errorf("landlock_create_ruleset (ABI %d): %w", abi, errno)
	}
	defer unix.Close(int(fd))

	for _, ru := range pl.rules {
		added, err := addRule(int(fd), ru, attr.handledFS)
		if err != nil {
			return rep, err
		}
		if added {
			rep.Rules++
		}
	}

	for _, pr := range pl.ports {
		attr := netPortAttr{allowedAccess: pr.rights, port: uint64(pr.port)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, ruleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
		if errno != 0 {
			return rep, fmt.Errorf("landlock rule on TCP port %d: landlock_add_rule: %w", pr.port, errno)
		}
		rep.Rules++
	}

	_, _, errno = unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0)
	switch errno {
	case 0:
		return rep, nil
	case unix.EPERM:
		return rep, fmt.Errorf("landlock_restrict_self: this thread has neither no_new_privs nor CAP_SYS_ADMIN; set PR_SET_NO_NEW_PRIVS on the same thread first: %w", errno)
	case unix.E2BIG:
		return rep, fmt.Errorf("landlock_restrict_self: this thread already runs under 16 nested Landlock domains, the kernel's limit: %w", errno)
	}
	return rep, fmt.Errorf("landlock_restrict_self: %w", errno)
}

// addRule opens ru.path with O_PATH, which reads nothing and needs no
// permission on the file itself, and adds it. A path found by listing a
// directory that has gone by now needs no rule; one the caller named must
// still be there. It reports whether a rule was added.
func addRule(rulesetFd int, ru rule, handled uint64) (bool, error) {
	// O_NOFOLLOW: the plan holds resolved paths and no symlinks; one that
	// is a symlink now was swapped in since, and gets no rule.
	fd, err := unix.Open(ru.path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		if ru.given {
			return false, &PolicyError{Field: "writable", Path: ru.path, Err: err}
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return false, nil
		}
		return false, fmt.Errorf("landlock rule on %s: %w", ru.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("landlock rule on %s: fstat: %w", ru.path, err)
	}
	rights := ru.rights & handled
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return false, nil
	default:
		rights &= fileRights
	}
	if rights == 0 {
		return false, nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	// The kernel reads the packed 12-byte struct; the Go struct's first
	// 12 bytes have that layout.
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("landlock rule on %s: landlock_add_rule: %w", ru.path, errno)
	}
	return true, nil
}
