package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// UDP sockets under a network policy (SocketRules.AllowUDP): subreaper
// mode's DNS for resolvers that ask over UDP. Landlock's network rights
// cover TCP only, so nothing but the supervisor holds a datagram's
// destination. It sees connect(2) and sendto(2) with an address already
// (emitNotify); sendmsg(2) and sendmmsg(2) carry theirs inside a msghdr in
// the caller's memory, which a filter cannot read, so with UDP sockets
// every one of them goes to the listener (but a TCP Fast Open send,
// refused, and a MSG_PROBE one, which sends nothing), whatever the
// socket: the descriptor number a filter could look at can be dup2'd
// onto a UDP socket by another thread after any look, so no socket type
// can be trusted to let one run.

// MsgProbe is MSG_PROBE (linux/socket.h), which golang.org/x/sys/unix
// does not name: a send with it builds no packet on an IP datagram socket.
const MsgProbe = 0x10

// udp reports whether the block admits UDP sockets and so hands every
// addressed send to the listener.
func (b block) udp() bool {
	return b.notify && b.sockets != nil && b.sockets.AllowUDP
}

// emitUDPSocket decides socket(2) for AF_INET and AF_INET6 when UDP is
// admitted: TCP (with AllowTCP), with its protocol or 0, goes to allow,
// UDP likewise to the listener; anything else to deny. The accumulator
// holds the domain.
func (b block) emitUDPSocket(a *asm, typ, proto uint32, allow, deny int) {
	stream, dgram := a.label(), a.label()
	a.stmt(opLd, typ)
	a.stmt(opAnd, ^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC))
	if b.sockets.AllowTCP {
		a.jump(opJeq, unix.SOCK_STREAM, stream, next)
	}
	a.jump(opJeq, unix.SOCK_DGRAM, dgram, deny)
	if b.sockets.AllowTCP {
		a.bind(stream)
		a.stmt(opLd, proto)
		a.jump(opJeq, 0, allow, next)
		a.jump(opJeq, unix.IPPROTO_TCP, allow, deny)
	}
	// A UDP socket goes to the listener, which makes it itself, held to
	// loopback (SO_BINDTODEVICE, which the caller cannot undo without
	// CAP_NET_RAW): the kernel binds an unbound UDP socket to every
	// address at its first send, even one that fails for want of an
	// address, where no filter sees it, and it would then take datagrams
	// from other hosts.
	udp := a.label()
	a.bind(dgram)
	a.stmt(opLd, proto)
	a.jump(opJeq, 0, udp, next)
	a.jump(opJeq, unix.IPPROTO_UDP, udp, deny)
	a.bind(udp)
	a.stmt(opRet, unix.SECCOMP_RET_USER_NOTIF)
}

// emitUDPSend lays out what the i-th entry of emitNotify's sendmsg and
// sendmmsg labels does under AllowUDP: the native sendmsg and sendmmsg go
// to the listener, which reads their msghdr as this architecture lays it
// out; x32's and a compat entry point's (32-bit pointers, another layout)
// fail with EACCES, TCP Fast Open or not.
//
// One native send runs as it is: one whose flags carry MSG_PROBE (and not
// MSG_FASTOPEN, refused). UDP and raw sockets send nothing with it (the
// kernel's ip_make_skb, ip_append_data and their IPv6 twins return before
// building a packet: a path-MTU probe), whatever the address; other
// sockets ignore the flag. corral's exec stage hands the listener itself
// to the engine with such a sendmsg (stage.unixSock.writeFDs), after this
// filter is in force and before anyone answers its listener.
func (b block) emitUDPSend(a *asm, i int, notify, deny, allow int) {
	native := isNative(b.abi.audit)
	if !native || (i != 0 && i != len(b.abi.sendmsg)) {
		a.ja(deny)
		return
	}
	arg := 2
	if i != 0 {
		arg = 3
	}
	flags, _ := argOffsets(b.abi, arg)
	a.stmt(opLd, flags)
	a.jump(opJset, unix.MSG_FASTOPEN, deny, next)
	a.jump(opJset, MsgProbe, allow, notify)
}

// isNative reports whether audit is the native arch value of a platform
// (not one of its compat entry points).
func isNative(audit uint32) bool {
	for _, p := range platforms {
		if p.native.audit == audit {
			return true
		}
	}
	return false
}

// WriteMemory writes buf into the memory of process (or thread) pid at
// addr (process_vm_writev): what the kernel itself writes back to a
// caller of a call a supervisor made for it (sendmmsg's msg_len).
func WriteMemory(pid int, addr uint64, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := unix.ProcessVMWritev(pid, local, remote, 0)
	if err != nil {
		return 0, fmt.Errorf("write memory of %d: %w", pid, err)
	}
	return n, nil
}
