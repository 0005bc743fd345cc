package stage

import (
	"os"
	"syscall"

	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// EffectiveCaps reads this thread's effective capabilities with capget(2),
// which needs no file descriptor: at a low RLIMIT_NOFILE, reading
// /proc/self/status would fail and make root look unprivileged.
func EffectiveCaps() (uint64, error) {
	sets, err := ThreadCaps()
	return sets.Effective, err
}

// CapSets are a thread's effective and permitted capabilities, one bit
// per capability number.
type CapSets struct{ Effective, Permitted uint64 }

// ThreadCaps reads this thread's effective and permitted sets with
// capget(2): one system call, no file and no parsing, where reading them
// from /proc/self/status costs an open, a read and a scan of 60 lines.
func ThreadCaps() (CapSets, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return CapSets{}, err
	}
	return CapSets{
		Effective: uint64(data[0].Effective) | uint64(data[1].Effective)<<32,
		Permitted: uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32,
	}, nil
}

// HoldsCap reports whether this thread holds c in its effective set: the
// module's one capability check.
func HoldsCap(c capability.Cap) bool {
	caps, err := EffectiveCaps()
	return err == nil && caps&(1<<uint(c)) != 0
}

// MapCallerIDs maps the caller's uid and gid to themselves in the new user
// namespace of a stage (as bwrap does, so tools that look up their passwd
// entry keep working), with setgroups denied as an unprivileged gid map
// requires. A non-zero uid loses every capability at the child's execve
// unless it is ambient, so the ones the child needs are carried that way.
func MapCallerIDs(sys *syscall.SysProcAttr, ambient []int) {
	uid, gid := os.Getuid(), os.Getgid()
	sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	sys.GidMappingsEnableSetgroups = false
	if uid != 0 {
		for _, c := range ambient {
			sys.AmbientCaps = append(sys.AmbientCaps, uintptr(c))
		}
	}
}
