package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The enforcer's guard and the io_uring denial at every entry point of
// each architecture, run in the interpreter (bpf_test.go).
func TestGuardEveryEntryPoint(t *testing.T) {
	const pid, pgid = 4242, 4240
	enosys := retErrno(unix.ENOSYS)
	neg := func(v int) uint64 { return uint64(uint32(int32(v))) }
	for _, goarch := range []string{"amd64", "arm64"} {
		p, _ := platformFor(goarch)
		prog, err := runnerFilter(goarch, RunnerRules{DenyIOURing: true, Guard: &EnforcerGuard{PID: pid, PGID: pgid}})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := runnerFilter(goarch, RunnerRules{})
		if err != nil {
			t.Fatal(err)
		}
		entries := append([]abi{p.native}, p.compat...)
		for _, a := range entries {
			g := guardTable[a.audit]
			type tc struct {
				what string
				nr   uint32
				args [6]uint64
				want uint32
			}
			cases := []tc{
				{"kill(corral, KILL)", g.kill, [6]uint64{pid, 9}, eperm},
				{"kill(corral, STOP)", g.kill, [6]uint64{pid, 19}, eperm},
				{"kill(corral, TERM)", g.kill, [6]uint64{pid, 15}, allow},
				{"kill(0, STOP)", g.kill, [6]uint64{0, 19}, eperm},
				{"kill(-1, KILL)", g.kill, [6]uint64{neg(-1), 9}, eperm},
				{"kill(-pgid, KILL)", g.kill, [6]uint64{neg(-pgid), 9}, eperm},
				{"kill(other, KILL)", g.kill, [6]uint64{pid + 1, 9}, allow},
				{"tkill(any, KILL)", g.tkill, [6]uint64{77, 9}, eperm},
				{"tkill(any, TERM)", g.tkill, [6]uint64{77, 15}, allow},
				{"tgkill(corral, t, STOP)", g.tgkill, [6]uint64{pid, 77, 19}, eperm},
				{"tgkill(other, t, STOP)", g.tgkill, [6]uint64{pid + 1, 77, 19}, allow},
				{"pidfd_open(corral)", g.pidfdOpen, [6]uint64{pid, 0}, eperm},
				{"pidfd_open(other)", g.pidfdOpen, [6]uint64{pid + 1, 0}, allow},
				{"pidfd_send_signal(KILL)", g.pidfdSendSignal, [6]uint64{3, 9}, eperm},
				{"pidfd_send_signal(TERM)", g.pidfdSendSignal, [6]uint64{3, 15}, allow},
			}
			for _, nr := range g.sigqueueinfo {
				cases = append(cases, tc{"rt_sigqueueinfo(corral, KILL)", nr, [6]uint64{pid, 9}, eperm},
					tc{"rt_sigqueueinfo(other, KILL)", nr, [6]uint64{pid + 1, 9}, allow})
			}
			for _, nr := range g.tgsigqueueinfo {
				cases = append(cases, tc{"rt_tgsigqueueinfo(corral, t, STOP)", nr, [6]uint64{pid, 1, 19}, eperm})
			}
			for _, nr := range g.fcntl {
				cases = append(cases, tc{"fcntl(F_SETSIG, KILL)", nr, [6]uint64{3, unix.F_SETSIG, 9}, eperm},
					tc{"fcntl(F_SETSIG, USR1)", nr, [6]uint64{3, unix.F_SETSIG, 10}, allow},
					tc{"fcntl(F_SETOWN, corral)", nr, [6]uint64{3, unix.F_SETOWN, pid}, allow})
			}
			for _, nr := range g.ioUring {
				cases = append(cases, tc{"io_uring", nr, [6]uint64{}, enosys})
			}
			for _, c := range cases {
				d := seccompData{nr: int32(c.nr), arch: a.audit, args: c.args}
				if got := mustRun(t, prog, d); got != c.want {
					t.Errorf("%s %s: %s, want %s", a.name, c.what, actionString(got), actionString(c.want))
				}
				if got := mustRun(t, plain, d); got != allow {
					t.Errorf("%s %s without a guard: %s, want allow", a.name, c.what, actionString(got))
				}
				if a.nrMask != 0 && c.nr < 512 {
					d.nr |= x32Bit
					if got := mustRun(t, prog, d); got != c.want {
						t.Errorf("x32 %s: %s, want %s", c.what, actionString(got), actionString(c.want))
					}
				}
			}
		}
	}
}

// In a new PID namespace the runner cannot name corral: only kill(0)
// reaches it (its group is the host side's).
func TestGuardPidns(t *testing.T) {
	prog, err := runnerFilter("amd64", RunnerRules{Guard: &EnforcerGuard{}})
	if err != nil {
		t.Fatal(err)
	}
	notified, err := runnerFilter("amd64", RunnerRules{NotifyAddresses: true, Guard: &EnforcerGuard{PID: 7}})
	if err != nil {
		t.Fatal(err)
	}
	for sig, want := range map[uint64]uint32{9: unix.SECCOMP_RET_USER_NOTIF, 19: unix.SECCOMP_RET_USER_NOTIF, 15: allow} {
		d := seccompData{nr: 424, arch: unix.AUDIT_ARCH_X86_64, args: [6]uint64{3, sig}}
		if got := mustRun(t, notified, d); got != want {
			t.Errorf("pidfd_send_signal(%d) with a listener: %s, want %#x", sig, actionString(got), want)
		}
		if (Data{Nr: d.nr, Arch: d.arch, Args: d.args}).Call() != CallPidfdSignal {
			t.Errorf("pidfd_send_signal is not told apart")
		}
	}
	for _, c := range []struct {
		nr   int32
		args [6]uint64
		want uint32
	}{
		{62, [6]uint64{0, 9}, eperm},
		{62, [6]uint64{uint64(uint32(0xffffffff)), 9}, allow},
		{200, [6]uint64{1, 9}, allow},
		{424, [6]uint64{3, 9}, allow},
		{72, [6]uint64{3, unix.F_SETSIG, 19}, eperm},
	} {
		if got := mustRun(t, prog, seccompData{nr: c.nr, arch: unix.AUDIT_ARCH_X86_64, args: c.args}); got != c.want {
			t.Errorf("nr %d %v: %s, want %s", c.nr, c.args[:3], actionString(got), actionString(c.want))
		}
	}
}
