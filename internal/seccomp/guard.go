package seccomp

import "golang.org/x/sys/unix"

// EnforcerGuard holds corral's own processes against the runner where
// Landlock has no signal scope (ABI < 6, Linux before 6.12): SIGKILL and
// SIGSTOP, the two signals corral cannot catch, fail with EPERM when aimed
// at corral by any addressing the filter can see (DESIGN.md, "Protecting
// the enforcer"). Every other signal corral handles as a request from
// outside. The numbers are the runner's view, fixed when the filter is
// built: BPF compares arguments with constants.
type EnforcerGuard struct {
	// PID is corral's process as the runner names it (subreaper mode: the
	// engine, the runner's parent); 0 when the runner cannot name it (a
	// new PID namespace, whose init drops both signals from inside).
	PID int
	// PGID is corral's process group as the runner names it; 0: none.
	PGID int
}

// guardCalls are the numbers of the calls the guard and the io_uring
// denial look at, at one entry point; noCall where it has none.
type guardCalls struct {
	kill, tkill, tgkill, pidfdOpen, pidfdSendSignal uint32
	sigqueueinfo, tgsigqueueinfo                    []uint32 // x32 has its own next to x86_64's
	fcntl                                           []uint32 // fcntl, and fcntl64 at 32-bit entry points
	ioUring                                         []uint32 // io_uring_setup, io_uring_enter, io_uring_register
}

// From the same tables as platforms (filter.go). On x86_64 the x32 bit is
// masked off before comparing, so x32's kill (62) is x86_64's; its
// rt_sigqueueinfo (524) and rt_tgsigqueueinfo (536) are its own.
var guardTable = map[uint32]guardCalls{
	unix.AUDIT_ARCH_X86_64: {kill: 62, tkill: 200, tgkill: 234, pidfdOpen: 434, pidfdSendSignal: 424,
		sigqueueinfo: []uint32{129, 524}, tgsigqueueinfo: []uint32{297, 536}, fcntl: []uint32{72}, ioUring: []uint32{425, 426, 427}},
	unix.AUDIT_ARCH_I386: {kill: 37, tkill: 238, tgkill: 270, pidfdOpen: 434, pidfdSendSignal: 424,
		sigqueueinfo: []uint32{178}, tgsigqueueinfo: []uint32{335}, fcntl: []uint32{55, 221}, ioUring: []uint32{425, 426, 427}},
	unix.AUDIT_ARCH_AARCH64: {kill: 129, tkill: 130, tgkill: 131, pidfdOpen: 434, pidfdSendSignal: 424,
		sigqueueinfo: []uint32{138}, tgsigqueueinfo: []uint32{240}, fcntl: []uint32{25}, ioUring: []uint32{425, 426, 427}},
	unix.AUDIT_ARCH_ARM: {kill: 37, tkill: 238, tgkill: 268, pidfdOpen: 434, pidfdSendSignal: 424,
		sigqueueinfo: []uint32{178}, tgsigqueueinfo: []uint32{363}, fcntl: []uint32{55, 221}, ioUring: []uint32{425, 426, 427}},
}

// emitIOURing makes io_uring_setup, io_uring_enter and io_uring_register
// fail with ENOSYS, as on a kernel without io_uring (programs fall back to
// plain system calls): a ring performs opens, renames, xattr changes and
// socket calls with no system call for the filter to see, and a ring fd the
// caller passed in would too. The syscall number is in the accumulator and
// stays there.
func (b block) emitIOURing(a *asm) {
	g := guardTable[b.abi.audit]
	for _, nr := range g.ioUring {
		skip := a.label()
		a.jump(opJeq, nr, next, skip)
		a.stmt(opRet, retErrno(unix.ENOSYS))
		a.bind(skip)
	}
}

// emitGuard lays out the enforcer's guard with the syscall number in the
// accumulator, which it reloads (loadNr) before falling through.
func (b block) emitGuard(a *asm, loadNr func()) {
	g := guardTable[b.abi.audit]
	gd := b.guard
	deny := a.label()
	after := a.label()
	// sigIn jumps to deny when argument arg is SIGKILL or SIGSTOP, and
	// falls through otherwise.
	sigIn := func(arg int) {
		lo, _ := argOffsets(b.abi, arg)
		a.stmt(opLd, lo)
		a.jump(opJeq, uint32(unix.SIGKILL), deny, next)
		a.jump(opJeq, uint32(unix.SIGSTOP), deny, next)
	}
	// call: when the syscall is nr, the body decides; a body that does
	// not deny falls through to the next call's check, nr reloaded.
	call := func(nr uint32, body func()) {
		if nr == noCall {
			return
		}
		skip := a.label()
		a.jump(opJeq, nr, next, skip)
		body()
		loadNr()
		a.bind(skip)
	}
	// pidIs: argument arg (a pid_t, compared on its low 32 bits as the
	// kernel takes it) is one of vals; falls through when it is not, to
	// the label miss.
	pidIs := func(arg int, vals []int32, hit, miss int) {
		lo, _ := argOffsets(b.abi, arg)
		a.stmt(opLd, lo)
		for _, v := range vals {
			a.jump(opJeq, uint32(v), hit, next)
		}
		a.ja(miss)
	}

	// kill(pid, sig): pid 0 is the caller's own group, where the runner
	// stays with corral without a terminal, and may join it again with
	// setpgid; -1 every process the caller may signal; -PGID corral's
	// group. Only 0 can reach corral from a new PID namespace (its group
	// is the host side's).
	killPids := []int32{0}
	if gd.PID > 0 {
		killPids = append(killPids, -1, int32(gd.PID))
	}
	if gd.PGID > 0 {
		killPids = append(killPids, -int32(gd.PGID))
	}
	call(g.kill, func() {
		hit, miss := a.label(), a.label()
		pidIs(0, killPids, hit, miss)
		a.bind(hit)
		sigIn(1)
		a.bind(miss)
	})
	if gd.PID > 0 {
		self := []int32{int32(gd.PID)}
		// tkill names a thread by tid, which is not known in advance:
		// refused for both signals whatever it names (libc's raise
		// uses tgkill).
		call(g.tkill, func() { sigIn(1) })
		call(g.tgkill, func() {
			hit, miss := a.label(), a.label()
			pidIs(0, self, hit, miss)
			a.bind(hit)
			sigIn(2)
			a.bind(miss)
		})
		for _, nr := range g.sigqueueinfo {
			call(nr, func() {
				hit, miss := a.label(), a.label()
				pidIs(0, self, hit, miss)
				a.bind(hit)
				sigIn(1)
				a.bind(miss)
			})
		}
		for _, nr := range g.tgsigqueueinfo {
			call(nr, func() {
				hit, miss := a.label(), a.label()
				pidIs(0, self, hit, miss)
				a.bind(hit)
				sigIn(2)
				a.bind(miss)
			})
		}
		// pidfd_open of corral: a pidfd is a way to signal it
		// (pidfd_send_signal) that names no pid.
		call(g.pidfdOpen, func() {
			hit, miss := a.label(), a.label()
			pidIs(0, self, hit, miss)
			a.bind(hit)
			a.ja(deny)
			a.bind(miss)
		})
		// pidfd_send_signal on a descriptor of /proc/PID opened as a
		// directory names no pid the filter can see. With a listener
		// both signals go to the supervisor, which looks at the
		// descriptor (CallPidfdSignal); without one they are refused
		// through it whatever it names.
		call(g.pidfdSendSignal, func() {
			if !b.notify {
				sigIn(1)
				return
			}
			lo, _ := argOffsets(b.abi, 1)
			notify := a.label()
			a.stmt(opLd, lo)
			a.jump(opJeq, uint32(unix.SIGKILL), notify, next)
			miss := a.label()
			a.jump(opJeq, uint32(unix.SIGSTOP), notify, miss)
			a.bind(notify)
			a.stmt(opRet, unix.SECCOMP_RET_USER_NOTIF)
			a.bind(miss)
		})
	}
	// fcntl(F_SETSIG, SIGKILL or SIGSTOP): signal-driven I/O delivers the
	// signal to the owner F_SETOWN names, corral's pid or group included,
	// with a pointer (F_SETOWN_EX) the filter cannot read. Any other
	// signal it delivers corral handles as a request.
	for _, nr := range g.fcntl {
		call(nr, func() {
			miss := a.label()
			cmd, _ := argOffsets(b.abi, 1)
			a.stmt(opLd, cmd)
			a.jump(opJeq, unix.F_SETSIG, next, miss)
			sigIn(2)
			a.bind(miss)
		})
	}
	a.ja(after)
	a.bind(deny)
	a.stmt(opRet, retErrno(unix.EPERM))
	a.bind(after)
}

// isPidfdSendSignal reports whether nr, at the entry point of arch, is
// pidfd_send_signal (the guard's notified call).
func isPidfdSendSignal(arch uint32, nr uint32) bool {
	g, ok := guardTable[arch]
	return ok && g.pidfdSendSignal != 0 && nr == g.pidfdSendSignal
}
