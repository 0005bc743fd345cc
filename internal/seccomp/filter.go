package seccomp

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Match says when a Rule applies to a call of its system call.
type Match uint8

const (
	// Always: every call.
	Always Match = iota
	// AnyBits: args[Arg] & Value != 0, over all 64 bits (flag words such
	// as the CLONE_NEW* bits of unshare(2)).
	AnyBits
	// Low32: uint32(args[Arg]) == uint32(Value). For arguments the kernel
	// takes as a 32-bit int (ioctl's request is an unsigned int), so
	// garbage a caller puts in the upper half cannot slip past.
	Low32
)

// Rule makes one system call fail with Errno instead of running, always or
// when one argument matches. Rules are checked in order and the first that
// matches decides; a call no rule matches is allowed.
type Rule struct {
	Syscall uintptr // number on the architecture corral was built for (unix.SYS_*)
	Match   Match
	Arg     int    // the argument Match looks at, 0 to 5; unused with Always
	Value   uint64 // the bits (AnyBits) or the value (Low32) to compare with
	Errno   unix.Errno
}

// x32Bit is __X32_SYSCALL_BIT: x86_64's x32 ABI enters with the x86_64 arch
// value and this bit set in the syscall number.
const x32Bit = 0x40000000

// auditArchLE is __AUDIT_ARCH_LE: set in the arch values of little-endian
// ABIs, and it tells which half of a 64-bit argument is the low one.
const auditArchLE = 0x40000000

// abi is one system-call entry point the kernel tells a filter apart by
// seccomp_data.arch.
type abi struct {
	name  string
	audit uint32
	// nrMask is ANDed into the syscall number before any comparison. On
	// x86_64 it clears the x32 bit, so a rule for a native number covers
	// x32's number for the same call too: the two tables share numbers
	// except in 512-547, which the kernel keeps free of native calls.
	nrMask uint32
	// ioctl lists the numbers of ioctl(2) at this entry point.
	ioctl []uint32
	// The calls SocketRules govern, or noCall where the entry point has
	// none: socket(2), socketpair(2), the multiplexer socketcall(2) and
	// io_uring_setup(2).
	socket, socketpair, socketcall, ioUringSetup uint32
	// The calls NotifyAddresses hands to the listener (connect, bind,
	// listen, and sendto with a destination), and the numbers of
	// sendmsg(2) and sendmmsg(2), refused with MSG_FASTOPEN.
	connect, bind, listen, sendto uint32
	sendmsg, sendmmsg             []uint32
}

// noCall marks a system call an entry point does not have.
const noCall = ^uint32(0)

type platform struct {
	native abi
	// compat entry points a process of this architecture can reach
	// (int 0x80 on x86_64, AArch32 tasks on arm64). Build leaves them
	// alone; DenyTerminalInjection covers them.
	compat []abi
}

// The numbers come from each architecture's system-call table
// (arch/x86/entry/syscalls/syscall_64.tbl and syscall_32.tbl,
// include/uapi/asm-generic/unistd.h, arch/arm/tools/syscall.tbl);
// io_uring_setup is 425 everywhere, as every call added since Linux 5.1.
var platforms = map[string]platform{
	"amd64": {
		// 16 is ioctl; 514 (with the x32 bit) is x32's own compat ioctl.
		// x32 shares socket (41) and socketpair (53) with x86_64.
		// x32 shares connect (42), bind (49), listen (50) and sendto
		// (44) too; its sendmsg is 518 and its sendmmsg 538.
		native: abi{name: "x86_64", audit: unix.AUDIT_ARCH_X86_64, nrMask: ^uint32(x32Bit), ioctl: []uint32{16, 514},
			socket: 41, socketpair: 53, socketcall: noCall, ioUringSetup: 425,
			connect: 42, bind: 49, listen: 50, sendto: 44, sendmsg: []uint32{46, 518}, sendmmsg: []uint32{307, 538}},
		compat: []abi{{name: "i386", audit: unix.AUDIT_ARCH_I386, ioctl: []uint32{54},
			socket: 359, socketpair: 360, socketcall: 102, ioUringSetup: 425,
			connect: 362, bind: 361, listen: 363, sendto: 369, sendmsg: []uint32{370}, sendmmsg: []uint32{345}}},
	},
	"arm64": {
		native: abi{name: "aarch64", audit: unix.AUDIT_ARCH_AARCH64, ioctl: []uint32{29},
			socket: 198, socketpair: 199, socketcall: noCall, ioUringSetup: 425,
			connect: 203, bind: 200, listen: 201, sendto: 206, sendmsg: []uint32{211}, sendmmsg: []uint32{269}},
		// 102 is socketcall in the old ARM ABI only; arm64 runs EABI
		// tasks, which do not have it, so refusing it costs nothing and
		// holds should a kernel ever route it.
		// send (289) has no address and is left alone.
		compat: []abi{{name: "arm", audit: unix.AUDIT_ARCH_ARM, ioctl: []uint32{54},
			socket: 281, socketpair: 288, socketcall: 102, ioUringSetup: 425,
			connect: 283, bind: 282, listen: 284, sendto: 290, sendmsg: []uint32{296}, sendmmsg: []uint32{374}}},
	},
}

func platformFor(goarch string) (platform, error) {
	p, ok := platforms[goarch]
	if !ok {
		return platform{}, fmt.Errorf("seccomp filters are built for amd64 and arm64 only, not %s", goarch)
	}
	return p, nil
}

// Build assembles rules into a program for the architecture corral was
// built for, covering its native system calls (and x32's on amd64). Every
// other arch value, the 32-bit compat entry points included, is allowed
// untouched: Build is for narrow filters (test jails, fail-closed probes),
// not a boundary against a process that switches ABI to dodge them.
func Build(rules []Rule) ([]unix.SockFilter, error) {
	return build(runtime.GOARCH, rules)
}

func build(goarch string, rules []Rule) ([]unix.SockFilter, error) {
	p, err := platformFor(goarch)
	if err != nil {
		return nil, err
	}
	for i, r := range rules {
		if err := r.check(p.native); err != nil {
			return nil, fmt.Errorf("seccomp rule %d: %w", i, err)
		}
	}
	return assemble([]block{{abi: p.native, rules: rules}})
}

// RunnerRules is what the runner's filter enforces beyond what it always
// does (ioctl with request TIOCSTI or TIOCLINUX fails with EPERM). One
// filter holds all of it: the runner's thread installs it once.
type RunnerRules struct {
	// Sockets limits the sockets the runner may create; nil leaves them
	// alone (--net host).
	Sockets *SocketRules
	// DenyVsock makes socket(AF_VSOCK, ...) fail with EACCES: no network
	// namespace separates vsock. (With Sockets, vsock is refused anyway.)
	DenyVsock bool
	// NotifyAddresses hands every call that names a socket address to
	// the filter's listener (SECCOMP_RET_USER_NOTIF), for a supervisor
	// to check the address and make the call itself: connect(2),
	// bind(2), listen(2) (which binds an unbound socket to the
	// any-address), and sendto(2) when its dest_addr is not NULL. With
	// it, whatever Sockets says: sendmsg(2) and sendmmsg(2) with
	// MSG_FASTOPEN fail with EACCES (a TCP Fast Open send connects to the
	// address in the message, which a filter cannot read), socketcall(2)
	// fails with EACCES and io_uring_setup(2) with ENOSYS (each could
	// make these calls where no filter sees them). Such a filter must be
	// installed with InstallWithListener, and something must answer its
	// listener: without one the calls fail with ENOSYS.
	NotifyAddresses bool
	// NotifyWrites hands the write-intent filesystem calls to the same
	// listener (writes.go): at the native entry point (x32's too), opens
	// with a write flag, and every create, rename, link, unlink and
	// truncate by path; at a compat entry point they fail with EACCES.
	// With NotifyAddresses only (it makes the filter's listener).
	NotifyWrites bool
	// NotifyMetadata hands every call that changes a file's mode, owner,
	// extended attributes or times (MetaCall) to the filter's listener at
	// the native entry point, and refuses them (EPERM) at the compat
	// ones: Landlock has no right for them, so a supervisor decides on
	// the file reached (subreaper mode's filesystem rules). Installed
	// with InstallWithListener, as NotifyAddresses.
	NotifyMetadata bool
	// ReportFS: the listener only names what the filesystem rules refuse
	// and lets every call run (namespace modes, where read-only mounts
	// and Landlock enforce): NotifyWrites and NotifyMetadata need no
	// NotifyAddresses then, and at the compat entry points, whose calls a
	// listener cannot read, they run untouched instead of failing; so do
	// the metadata calls on a descriptor (fchmod, fchown, fsetxattr,
	// fremovexattr, futimens), which tar -x makes for every file
	// (metadata.go, onDescriptor).
	ReportFS bool
	// NotifyMounts hands the calls of a sandbox that mounts (mounts.go)
	// to the listener, for it to name; installed with InstallWithListener.
	NotifyMounts bool
	// DenyIOURing makes io_uring_setup(2), io_uring_enter(2) and
	// io_uring_register(2) fail with ENOSYS (guard.go): under any sandbox
	// policy, a ring would make the calls the policy checks where no
	// filter sees them.
	DenyIOURing bool
	// Guard, when set, refuses SIGKILL and SIGSTOP aimed at corral's own
	// processes (guard.go); nil: none.
	Guard *EnforcerGuard
}

// SocketRules is the seccomp half of the network policy in subreaper mode,
// where there is no network namespace. seccomp sees the integer arguments
// of socket(2), never the address of a connect or bind (a pointer), so it
// decides which kinds of socket may exist, and Landlock's network rights
// (ABI 4+) decide the TCP ports.
//
// socket(domain, type, protocol) fails with EACCES unless domain is
// AF_UNIX or AF_NETLINK, or, with AllowTCP, domain is AF_INET or AF_INET6,
// type is SOCK_STREAM (SOCK_NONBLOCK and SOCK_CLOEXEC aside) and protocol
// is 0 or IPPROTO_TCP. Only the low 32 bits of each argument are compared:
// the kernel takes them as ints. The protocol matters: Landlock's rights
// cover TCP only, and SOCK_STREAM with IPPROTO_SCTP or IPPROTO_MPTCP would
// be a stream socket no port rule governs.
//
// socketpair(2) works for AF_UNIX (the only family that implements it) and
// fails with EACCES for any other. io_uring_setup(2) fails with ENOSYS, as
// on a kernel without io_uring, so programs fall back to plain system
// calls: an io_uring socket operation creates a socket without a
// socket(2) call for the filter to see.
//
// socketcall(2), the i386 multiplexer every socket call of the 32-bit x86
// ABI can go through, fails with EACCES whatever it is asked: its
// arguments lie in memory, where a filter cannot read them. musl tries the
// direct calls (socket is 359 there, filtered as above) first and only
// falls back to socketcall on ENOSYS, so its 32-bit programs keep AF_UNIX;
// glibc built for kernels before 4.3 (the usual i386 build) uses socketcall
// only, so its 32-bit programs get no sockets at all, AF_UNIX included.
// That is the fail-closed side of a corner: 32-bit x86 programs under a
// network policy.
type SocketRules struct {
	// AllowTCP admits TCP sockets over IPv4 and IPv6 (--allow-net,
	// --host-port, --publish); which ports they reach is Landlock's to say.
	AllowTCP bool
	// NotifyInet hands an AF_INET or AF_INET6 socket these rules refuse
	// (UDP for a DNS query, raw, SCTP) to the filter's listener instead of
	// failing it here, so that the supervisor can name what was tried
	// before it refuses it: a client that resolves names itself learns why
	// it fails. With RunnerRules.NotifyAddresses only.
	NotifyInet bool
	// AllowUDP admits UDP sockets over IPv4 and IPv6 too (SOCK_DGRAM,
	// protocol 0 or IPPROTO_UDP), for the tree's DNS queries in
	// subreaper mode, made by the listener's supervisor (socket(2) goes
	// to it). No Landlock right covers UDP, so the supervisor must hold
	// every datagram's destination: with NotifyAddresses, sendmsg(2) and
	// sendmmsg(2) then go to the listener too (their destination lies in
	// memory a filter cannot read) but for MSG_FASTOPEN, refused, and
	// MSG_PROBE, which sends no datagram (udp.go); they fail with EACCES
	// where the listener could not read them as the native ABI lays them
	// out (x32's and the compat entry points', whose msghdr has 32-bit
	// pointers). With NotifyAddresses only.
	AllowUDP bool
}

// RunnerFilter returns the filter corral installs on the runner's thread
// just before its execve: the terminal-injection rules, and the socket
// rules when r asks for them, at every entry point of the architecture.
//
// Only the low 32 bits of ioctl's request are compared, as the kernel does
// (ioctl's cmd is an unsigned int): 0xffffffff00005412 is TIOCSTI too. The
// compat entry points are covered rather than refused, so 32-bit programs
// keep working under corral. An arch value this architecture's kernel never
// produces is allowed: every entry point it has is listed, and refusing
// unknown ones would only break the runner should a kernel grow a new one.
func RunnerFilter(r RunnerRules) ([]unix.SockFilter, error) {
	return runnerFilter(runtime.GOARCH, r)
}

func runnerFilter(goarch string, r RunnerRules) ([]unix.SockFilter, error) {
	p, err := platformFor(goarch)
	if err != nil {
		return nil, err
	}
	writes := r.NotifyWrites && (r.NotifyAddresses || r.ReportFS)
	blocks := []block{{abi: p.native, rules: runnerRules(p.native, r), sockets: r.Sockets, vsock: r.DenyVsock, notify: r.NotifyAddresses, meta: r.NotifyMetadata,
		writes: writes, report: r.ReportFS, mounts: r.NotifyMounts, ioUring: r.DenyIOURing, guard: r.Guard}}
	for _, c := range p.compat {
		blocks = append(blocks, block{abi: c, rules: runnerRules(c, r), sockets: r.Sockets, vsock: r.DenyVsock, notify: r.NotifyAddresses, meta: r.NotifyMetadata && !r.ReportFS,
			writes: writes && !r.ReportFS, ioUring: r.DenyIOURing, guard: r.Guard})
	}
	return assemble(blocks)
}

// runnerRules are the plain errno rules of the runner's filter at one
// entry point: the terminal's, and under NotifyMetadata (not ReportFS)
// the inode flag changes (attrRules).
func runnerRules(a abi, r RunnerRules) []Rule {
	rules := terminalRules(a)
	if r.NotifyMetadata && !r.ReportFS {
		// Subreaper mode's checked metadata; under ReportFS (namespace
		// modes) the read-only mounts refuse them where they must.
		rules = append(rules, attrRules(a)...)
	}
	return rules
}

func terminalRules(a abi) []Rule {
	var rules []Rule
	for _, nr := range a.ioctl {
		for _, req := range []uint64{unix.TIOCSTI, unix.TIOCLINUX} {
			rules = append(rules, Rule{Syscall: uintptr(nr), Match: Low32, Arg: 1, Value: req, Errno: unix.EPERM})
		}
	}
	return rules
}

func (r Rule) check(a abi) error {
	if uint64(r.Syscall) > 0xffffffff {
		return fmt.Errorf("syscall number %#x does not fit in 32 bits", r.Syscall)
	}
	if a.nrMask != 0 && uint32(r.Syscall)&^a.nrMask != 0 {
		return fmt.Errorf("syscall number %#x is not a native %s number (the native number covers x32's)", r.Syscall, a.name)
	}
	switch r.Match {
	case Always:
	case AnyBits, Low32:
		if r.Arg < 0 || r.Arg > 5 {
			return fmt.Errorf("argument index %d out of range 0-5", r.Arg)
		}
		if r.Match == AnyBits && r.Value == 0 {
			return fmt.Errorf("AnyBits with an empty mask never matches")
		}
	default:
		return fmt.Errorf("unknown match %d", r.Match)
	}
	// Errno 0 would make the call "succeed" without running; above
	// MAX_ERRNO the kernel clamps it. Neither is something to ask for.
	if r.Errno < 1 || r.Errno > 4095 {
		return fmt.Errorf("errno %d out of range 1-4095", int(r.Errno))
	}
	return nil
}

type block struct {
	abi     abi
	rules   []Rule
	sockets *SocketRules   // nil: no socket rules
	vsock   bool           // socket(AF_VSOCK) fails with EACCES
	notify  bool           // the address calls go to the listener
	writes  bool           // the write-intent calls go to it too (writes.go)
	meta    bool           // the metadata calls go to the listener (emitMeta)
	report  bool           // the listener only names (ReportFS): the f-calls are left alone (emitMeta)
	mounts  bool           // a mounting sandbox's calls go to the listener (mounts.go)
	ioUring bool           // io_uring's calls fail with ENOSYS (guard.go)
	guard   *EnforcerGuard // nil: no guard (guard.go)
}

// assemble lays out: load arch; for each block, "arch matches → jump to its
// code"; allow any other arch; then each block: load nr, the rules, allow.
func assemble(blocks []block) ([]unix.SockFilter, error) {
	var a asm
	a.stmt(opLd, offArch)
	starts := make([]int, len(blocks))
	for i, b := range blocks {
		starts[i] = a.label()
		miss := a.label()
		a.jump(opJeq, b.abi.audit, next, miss)
		a.ja(starts[i]) // a block may lie beyond a conditional jump's 255
		a.bind(miss)
	}
	a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
	for i, b := range blocks {
		a.bind(starts[i])
		b.emit(&a)
	}
	return a.finish()
}

// emit keeps the (masked) syscall number in the accumulator between rules,
// reloading it after a rule that loaded an argument.
func (b block) emit(a *asm) {
	loadNr := func() {
		a.stmt(opLd, offNr)
		if b.abi.nrMask != 0 {
			a.stmt(opAnd, b.abi.nrMask)
		}
	}
	loadNr()
	for _, r := range b.rules {
		skip := a.label()
		a.jump(opJeq, uint32(r.Syscall), next, skip)
		if r.Match == Always {
			a.stmt(opRet, retErrno(r.Errno))
			a.bind(skip)
			continue
		}
		hit := a.label()
		lo, hi := argOffsets(b.abi, r.Arg)
		switch r.Match {
		case AnyBits:
			if m := uint32(r.Value); m != 0 {
				a.stmt(opLd, lo)
				a.jump(opJset, m, hit, next)
			}
			if m := uint32(r.Value >> 32); m != 0 {
				a.stmt(opLd, hi)
				a.jump(opJset, m, hit, next)
			}
		case Low32:
			a.stmt(opLd, lo)
			a.jump(opJeq, uint32(r.Value), hit, next)
		}
		loadNr()
		a.ja(skip)
		a.bind(hit)
		a.stmt(opRet, retErrno(r.Errno))
		a.bind(skip)
	}
	if b.ioUring {
		b.emitIOURing(a)
	}
	if b.guard != nil {
		b.emitGuard(a, loadNr)
	}
	if b.meta {
		b.emitMeta(a)
	}
	if b.notify {
		b.emitNotify(a)
	}
	if b.writes {
		b.emitWrites(a)
	}
	if b.mounts {
		b.emitMounts(a)
	}
	if b.vsock {
		b.emitVsock(a)
		loadNr()
	}
	if b.sockets != nil {
		b.emitSockets(a)
	}
	a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
}

// emitNotify lays out the address rules, with the syscall number in the
// accumulator; a call they do not concern falls through with it still
// there. The calls they concern end here: none of them is one the socket
// rules govern.
func (b block) emitNotify(a *asm) {
	notify, deny, allow, sendto, rest := a.label(), a.label(), a.label(), a.label(), a.label()
	a.jump(opJeq, b.abi.connect, notify, next)
	a.jump(opJeq, b.abi.bind, notify, next)
	a.jump(opJeq, b.abi.listen, notify, next)
	a.jump(opJeq, b.abi.sendto, sendto, next)
	if b.abi.socketcall != noCall {
		a.jump(opJeq, b.abi.socketcall, deny, next)
	}
	fastopen := make([]int, 0, len(b.abi.sendmsg)+len(b.abi.sendmmsg))
	for _, nr := range b.abi.sendmsg {
		l := a.label()
		fastopen = append(fastopen, l)
		a.jump(opJeq, nr, l, next)
	}
	for _, nr := range b.abi.sendmmsg {
		l := a.label()
		fastopen = append(fastopen, l)
		a.jump(opJeq, nr, l, next)
	}
	a.jump(opJeq, b.abi.ioUringSetup, next, rest)
	a.stmt(opRet, retErrno(unix.ENOSYS))

	a.bind(sendto)
	lo, hi := argOffsets(b.abi, 4)
	a.stmt(opLd, lo)
	a.jump(opJeq, 0, next, notify)
	a.stmt(opLd, hi)
	a.jump(opJeq, 0, allow, notify)

	// The flags are sendmsg's third argument and sendmmsg's fourth.
	for i, l := range fastopen {
		a.bind(l)
		if b.udp() {
			// Every sendmsg and sendmmsg to the listener, or refused
			// (udp.go).
			b.emitUDPSend(a, i, notify, deny, allow)
			continue
		}
		arg := 2
		if i >= len(b.abi.sendmsg) {
			arg = 3
		}
		flags, _ := argOffsets(b.abi, arg)
		a.stmt(opLd, flags)
		a.jump(opJset, unix.MSG_FASTOPEN, deny, allow)
	}

	a.bind(notify)
	a.stmt(opRet, unix.SECCOMP_RET_USER_NOTIF)
	a.bind(deny)
	a.stmt(opRet, retErrno(unix.EACCES))
	a.bind(allow)
	a.stmt(opRet, unix.SECCOMP_RET_ALLOW)
	a.bind(rest)
}

// emitVsock makes socket(AF_VSOCK, ...) fail with EACCES; it leaves the
// accumulator changed.
func (b block) emitVsock(a *asm) {
	other, deny := a.label(), a.label()
	a.jump(opJeq, b.abi.socket, next, other)
	domain, _ := argOffsets(b.abi, 0)
	a.stmt(opLd, domain)
	a.jump(opJeq, unix.AF_VSOCK, deny, other)
	a.bind(deny)
	a.stmt(opRet, retErrno(unix.EACCES))
	a.bind(other)
}

// emitSockets lays out the socket rules after the block's other rules, with
// the syscall number in the accumulator; a call they do not concern falls
// through to the block's final allow.
func (b block) emitSockets(a *asm) {
	sock, pair, deny, allow := a.label(), a.label(), a.label(), a.label()
	a.jump(opJeq, b.abi.socket, sock, next)
	a.jump(opJeq, b.abi.socketpair, pair, next)
	if b.abi.socketcall != noCall {
		a.jump(opJeq, b.abi.socketcall, deny, next)
	}
	rest := a.label()
	a.jump(opJeq, b.abi.ioUringSetup, next, rest)
	a.stmt(opRet, retErrno(unix.ENOSYS))
	a.bind(rest)
	a.ja(allow)

	domain, _ := argOffsets(b.abi, 0)
	typ, _ := argOffsets(b.abi, 1)
	proto, _ := argOffsets(b.abi, 2)

	// An inet socket the rules refuse: refused here, or, with
	// NotifyInet, refused by the supervisor, which names it.
	denyInet := deny
	if b.sockets.NotifyInet && b.notify {
		denyInet = a.label()
	}
	a.bind(sock)
	a.stmt(opLd, domain)
	a.jump(opJeq, unix.AF_UNIX, allow, next)
	inet := a.label()
	a.jump(opJeq, unix.AF_NETLINK, allow, next)
	a.jump(opJeq, unix.AF_INET, inet, next)
	a.jump(opJeq, unix.AF_INET6, inet, deny)
	a.bind(inet)
	switch udp := b.udp(); {
	case !b.sockets.AllowTCP && !udp:
		a.ja(denyInet)
	case !udp:
		a.stmt(opLd, typ)
		a.stmt(opAnd, ^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC))
		a.jump(opJeq, unix.SOCK_STREAM, next, denyInet)
		a.stmt(opLd, proto)
		a.jump(opJeq, 0, allow, next)
		a.jump(opJeq, unix.IPPROTO_TCP, allow, denyInet)
	default:
		b.emitUDPSocket(a, typ, proto, allow, denyInet) // udp.go
	}
	if denyInet != deny {
		a.bind(denyInet)
		a.stmt(opRet, unix.SECCOMP_RET_USER_NOTIF)
	}

	a.bind(pair)
	a.stmt(opLd, domain)
	a.jump(opJeq, unix.AF_UNIX, allow, deny)

	a.bind(deny)
	a.stmt(opRet, retErrno(unix.EACCES))
	a.bind(allow)
}

// argOffsets gives the offsets of the low and high 32-bit halves of
// args[i]; BPF_LD|BPF_W loads 32 bits in host order.
func argOffsets(a abi, i int) (lo, hi uint32) {
	base := uint32(offArgs + 8*i)
	if a.audit&auditArchLE != 0 {
		return base, base + 4
	}
	return base + 4, base
}

func retErrno(e unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA
}
