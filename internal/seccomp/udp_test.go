package seccomp

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// udpReference says what SocketRules.AllowUDP means, without BPF, on top
// of notifyReference: UDP sockets go to the listener; the native sendmsg
// and sendmmsg go to it too, unless MSG_FASTOPEN (EACCES) or MSG_PROBE
// (allowed); x32's and the compat entry points' fail with EACCES.
func udpReference(a abi, native bool, r RunnerRules, d seccompData) uint32 {
	if d.arch != a.audit || !r.NotifyAddresses || r.Sockets == nil || !r.Sockets.AllowUDP {
		return notifyReference(a, r, d)
	}
	nr := uint32(d.nr)
	if a.nrMask != 0 {
		nr &= a.nrMask
	}
	eacces := retErrno(unix.EACCES)
	for i, n := range append(append([]uint32{}, a.sendmsg...), a.sendmmsg...) {
		if nr != n {
			continue
		}
		if !native || (i != 0 && i != len(a.sendmsg)) {
			return eacces
		}
		flags := uint32(d.args[2])
		if i != 0 {
			flags = uint32(d.args[3])
		}
		switch {
		case flags&unix.MSG_FASTOPEN != 0:
			return eacces
		case flags&MsgProbe != 0:
			return allow
		}
		return notifyRet
	}
	dom, typ, proto := uint32(d.args[0]), uint32(d.args[1])&^(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), uint32(d.args[2])
	if nr == a.socket && (dom == unix.AF_INET || dom == unix.AF_INET6) && typ == unix.SOCK_DGRAM && (proto == 0 || proto == unix.IPPROTO_UDP) {
		return notifyRet
	}
	return notifyReference(a, r, d)
}

func TestUDPFilterEveryEntryPoint(t *testing.T) {
	const garbage = 0xffffffff00000000
	for _, goarch := range []string{"amd64", "arm64"} {
		for _, r := range []RunnerRules{
			{Sockets: &SocketRules{AllowTCP: true, AllowUDP: true, NotifyInet: true}, DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{AllowUDP: true, NotifyInet: true}, DenyVsock: true, NotifyAddresses: true},
			{Sockets: &SocketRules{AllowTCP: true, AllowUDP: true}, NotifyAddresses: true},
			// Without the listener AllowUDP changes nothing.
			{Sockets: &SocketRules{AllowTCP: true, AllowUDP: true}},
		} {
			t.Run(fmt.Sprintf("%s %+v %+v", goarch, r, *r.Sockets), func(t *testing.T) {
				prog, err := runnerFilter(goarch, r)
				if err != nil {
					t.Fatal(err)
				}
				p := platforms[goarch]
				abis := append([]abi{p.native}, p.compat...)
				seen := map[string]int{}
				for ai, a := range abis {
					var nrs []uint32
					for _, b := range abis {
						nrs = append(nrs, b.socket, b.socketpair, b.socketcall, b.connect, b.bind, b.listen, b.sendto, b.ioUringSetup, 0, 1, 45)
						nrs = append(nrs, b.sendmsg...)
						nrs = append(nrs, b.sendmmsg...)
					}
					for _, nr := range nrs {
						if nr == noCall {
							continue
						}
						variants := []int32{int32(nr)}
						if a.nrMask != 0 {
							variants = append(variants, int32(nr|x32Bit))
						}
						for _, n := range variants {
							for _, args := range [][6]uint64{
								{}, {unix.AF_INET, unix.SOCK_DGRAM}, {unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_UDP},
								{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP}, {unix.AF_INET, unix.SOCK_DGRAM | garbage, garbage},
								{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_UDP}, {unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP},
								{unix.AF_UNIX, unix.SOCK_DGRAM}, {unix.AF_VSOCK, unix.SOCK_DGRAM},
								{3, 0x1000, 16, 0, 0, 0}, {3, 0x1000, 16, 0, 0x2000, 16},
								{3, 0x1000, unix.MSG_FASTOPEN, 0}, {3, 0x1000, 2, unix.MSG_FASTOPEN}, {3, 0x1000, unix.MSG_NOSIGNAL, unix.MSG_DONTWAIT},
								{3, 0x1000, MsgProbe | unix.MSG_NOSIGNAL, 0}, {3, 0x1000, 2, MsgProbe}, {3, 0x1000, MsgProbe | unix.MSG_FASTOPEN, MsgProbe | unix.MSG_FASTOPEN},
							} {
								d := seccompData{nr: n, arch: a.audit, args: args}
								want := udpReference(a, ai == 0, r, d)
								if got := mustRun(t, prog, d); got != want {
									t.Fatalf("%s nr %#x args %#x: %s, want %s", a.name, d.nr, d.args, actionString(got), actionString(want))
								}
								seen[actionString(want)]++
							}
						}
					}
				}
				if r.NotifyAddresses && seen[actionString(notifyRet)] == 0 {
					t.Error("no case expected a notification")
				}
			})
		}
	}
}
