package landlock

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// knownABI is the newest Landlock ABI this package knows the rights of. A
// newer kernel is used as if it had this one: rights added later stay
// unhandled (allowed), which Describe says.
const knownABI = 7

// Filesystem rights, and the groups corral grants them in.
const (
	fsExecute    = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile  = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile   = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir    = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRemoveDir  = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	fsRemoveFile = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	fsMakeChar   = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	fsMakeDir    = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	fsMakeReg    = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	fsMakeSock   = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	fsMakeFifo   = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	fsMakeBlock  = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	fsMakeSym    = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer      = unix.LANDLOCK_ACCESS_FS_REFER     // ABI 2
	fsTruncate   = unix.LANDLOCK_ACCESS_FS_TRUNCATE  // ABI 3
	fsIoctlDev   = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV // ABI 5

	// readRights are granted everywhere that is not hidden.
	readRights = fsExecute | fsReadFile | fsReadDir
	// writeRights are granted only beneath writable paths. IOCTL_DEV is
	// among them: a device a user makes writable (a GPU under /dev/dri) is
	// meant to be driven, and elsewhere only the terminals need it.
	writeRights = fsWriteFile | fsRemoveDir | fsRemoveFile | fsMakeChar | fsMakeDir | fsMakeReg |
		fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym | fsRefer | fsTruncate | fsIoctlDev
	// fileRights are the only ones a rule on a non-directory may carry
	// (the kernel says EINVAL otherwise).
	fileRights = fsExecute | fsWriteFile | fsReadFile | fsTruncate | fsIoctlDev

	// No TRUNCATE: the kernel ignores O_TRUNC on a device (a shell's
	// ">/dev/null"), and truncating one means nothing.
	devRW  = fsReadFile | fsWriteFile
	devTTY = devRW | fsIoctlDev
)

const (
	scopeAbstractUnix = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET // ABI 6
	scopeSignal       = unix.LANDLOCK_SCOPE_SIGNAL               // ABI 6
	ipcScopes         = scopeAbstractUnix | scopeSignal
)

// fsRightsAt is what handled_access_fs may hold at an ABI.
func fsRightsAt(abi int) uint64 {
	r := uint64(fsExecute | fsWriteFile | fsReadFile | fsReadDir | fsRemoveDir | fsRemoveFile |
		fsMakeChar | fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym)
	if abi >= 2 {
		r |= fsRefer
	}
	if abi >= 3 {
		r |= fsTruncate
	}
	if abi >= 5 {
		r |= fsIoctlDev
	}
	return r
}

// Network rights (ABI 4).
const (
	netBindTCP    = unix.LANDLOCK_ACCESS_NET_BIND_TCP
	netConnectTCP = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
)

func netRightsAt(abi int) uint64 {
	if abi >= 4 {
		return netBindTCP | netConnectTCP
	}
	return 0
}

func scopesAt(abi int) uint64 {
	if abi >= 6 {
		return ipcScopes
	}
	return 0
}

var fsNames = []struct {
	bit  uint64
	name string
}{
	{fsExecute, "execute"}, {fsWriteFile, "write_file"}, {fsReadFile, "read_file"}, {fsReadDir, "read_dir"},
	{fsRemoveDir, "remove_dir"}, {fsRemoveFile, "remove_file"}, {fsMakeChar, "make_char"},
	{fsMakeDir, "make_dir"}, {fsMakeReg, "make_reg"}, {fsMakeSock, "make_sock"}, {fsMakeFifo, "make_fifo"},
	{fsMakeBlock, "make_block"}, {fsMakeSym, "make_sym"}, {fsRefer, "refer"}, {fsTruncate, "truncate"},
	{fsIoctlDev, "ioctl_dev"},
}

var netNames = []struct {
	bit  uint64
	name string
}{{netBindTCP, "bind_tcp"}, {netConnectTCP, "connect_tcp"}}

var scopeNames = []struct {
	bit  uint64
	name string
}{{scopeAbstractUnix, "abstract_unix_socket"}, {scopeSignal, "signal"}}

func names(set uint64, table []struct {
	bit  uint64
	name string
}) []string {
	var out []string
	for _, e := range table {
		if set&e.bit != 0 {
			out = append(out, e.name)
		}
	}
	return out
}

// UnavailableError means the kernel offers no Landlock: a policy cannot be
// enforced, and a caller that fails closed must not start the command.
type UnavailableError struct {
	Errno unix.Errno // ENOSYS: not in the kernel (or refused by seccomp); EOPNOTSUPP: disabled at boot
}

func (e *UnavailableError) Error() string {
	switch e.Errno {
	case unix.ENOSYS:
		return "Landlock is not available: the kernel lacks it (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK), or a seccomp filter refuses its system calls (ENOSYS)"
	case unix.EOPNOTSUPP:
		return "Landlock is built into the kernel but disabled: add landlock to the lsm= boot parameter (EOPNOTSUPP)"
	}
	return fmt.Sprintf("Landlock is not usable: landlock_create_ruleset: %v", e.Errno)
}

func (e *UnavailableError) Unwrap() error { return e.Errno }

// ABIError means Landlock is there but too old for something asked of it.
type ABIError struct {
	What string // what was asked, e.g. "IPC isolation (signal and abstract Unix socket scopes)"
	Need int    // the ABI it needs
	Have int    // the kernel's
}

func (e *ABIError) Error() string {
	return fmt.Sprintf("%s needs Landlock ABI %d (%s); this kernel has ABI %d", e.What, e.Need, kernelFor(e.Need), e.Have)
}

func kernelFor(abi int) string {
	return map[int]string{1: "Linux 5.13", 2: "Linux 5.19", 3: "Linux 6.2", 4: "Linux 6.7",
		5: "Linux 6.10", 6: "Linux 6.12", 7: "Linux 6.15"}[abi]
}

// ABI returns the Landlock ABI version of the running kernel, or an
// *UnavailableError. It creates nothing.
//
// TestABIMaxEnv, when set to a number from 1 up, caps what it returns: the
// tests run the fallbacks of older kernels (Landlock without scopes, ABI <
// 6) on a new one. It only ever lowers the ABI, and every fallback holds on
// its own, so whoever sets it (a runner starting a nested corral) gets a
// corral that enforces no less than on an older kernel, or refuses with
// 125 what an older kernel cannot have: nothing a caller of corral could
// not get by passing fewer options. It never reaches past the corral whose
// environment holds it (Landlock domains only stack).
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, &UnavailableError{Errno: errno}
	}
	abi := int(v)
	if max, err := strconv.Atoi(os.Getenv(TestABIMaxEnv)); err == nil && max >= 1 && max < abi {
		abi = max
	}
	return abi, nil
}

// TestABIMaxEnv names the test-only cap on the ABI corral uses (ABI).
const TestABIMaxEnv = "CORRAL_TEST_LANDLOCK_ABI_MAX"

// Info is what the running kernel's Landlock enforces, as far as this
// package knows the rights: for `corral probe` and -v.
type Info struct {
	ABI    int
	FS     []string // filesystem rights, e.g. "write_file", "truncate", "ioctl_dev"
	Net    []string // network rights: "bind_tcp", "connect_tcp" (ABI 4)
	Scopes []string // "abstract_unix_socket", "signal"
}

// TCPPortRules reports whether the kernel's Landlock can limit TCP bind and
// connect by port (ABI 4, Linux 6.7): whether a Policy with Net can be
// enforced.
func (i Info) TCPPortRules() bool {
	return netRightsAt(min(i.ABI, knownABI)) == netBindTCP|netConnectTCP
}

// IPCScopes reports whether the kernel's Landlock scopes signals and
// abstract Unix sockets (ABI 6, Linux 6.12): whether a Policy with
// IsolateIPC can be enforced.
func (i Info) IPCScopes() bool { return scopesAt(min(i.ABI, knownABI)) == ipcScopes }

// Describe reports the running kernel's Landlock, or an *UnavailableError.
func Describe() (Info, error) {
	abi, err := ABI()
	if err != nil {
		return Info{}, err
	}
	return describe(abi), nil
}

func describe(abi int) Info {
	k := min(abi, knownABI)
	return Info{
		ABI:    abi,
		FS:     names(fsRightsAt(k), fsNames),
		Net:    names(netRightsAt(k), netNames),
		Scopes: names(scopesAt(k), scopeNames),
	}
}

func (i Info) String() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	s := fmt.Sprintf("Landlock ABI %d; filesystem rights: %s; network rights: %s; scopes: %s",
		i.ABI, list(i.FS), list(i.Net), list(i.Scopes))
	if i.ABI > knownABI {
		s += fmt.Sprintf(" (the kernel's ABI is newer than corral knows: rights added after ABI %d are not used)", knownABI)
	}
	return s
}
