package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mountsReference says what NotifyMounts means, without BPF: at the
// native entry point the mount family goes to the listener, clone and
// unshare only with CLONE_NEWNS or CLONE_NEWUSER in their first
// argument's low 32 bits; anything else, and every compat entry point,
// is allowed.
func mountsReference(a abi, d seccompData) uint32 {
	calls, ok := mountNative[a.audit]
	if !ok || d.arch != a.audit {
		return allow
	}
	c, ok := calls[uint32(d.nr)&maskOf(a)]
	if !ok {
		return allow
	}
	if (c == MountClone || c == MountUnshare) && uint32(d.args[0])&NamespaceFlags == 0 {
		return allow
	}
	return uint32(unix.SECCOMP_RET_USER_NOTIF)
}

func TestMountsFilterEveryEntryPoint(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			prog, err := runnerFilter(goarch, RunnerRules{NotifyMounts: true})
			if err != nil {
				t.Fatal(err)
			}
			p := platforms[goarch]
			abis := append([]abi{p.native}, p.compat...)
			seen := map[string]int{}
			for _, a := range abis {
				var nrs []uint32
				for _, calls := range mountNative {
					for nr := range calls {
						nrs = append(nrs, nr)
					}
				}
				nrs = append(nrs, 0, 1, 57, 435)
				for _, nr := range nrs {
					for _, fl := range []uint64{0, 17, unix.CLONE_NEWNS, unix.CLONE_NEWUSER | 17, unix.CLONE_NEWPID | unix.CLONE_NEWNET,
						unix.CLONE_VM | unix.CLONE_THREAD, 0xffffffff00000000} {
						d := seccompData{nr: int32(nr), arch: a.audit, args: [6]uint64{fl}}
						want := mountsReference(a, d)
						if nr == 0 || nr == 1 || a.audit != p.native.audit {
							want = allow
						}
						got := mustRun(t, prog, d)
						if nr == a.ioctl[0] || nr == a.ioUringSetup {
							continue // the terminal and io_uring rules' own tests cover them
						}
						if got != want {
							t.Fatalf("%s nr %d flags %#x: %s, want %s", a.name, nr, fl, actionString(got), actionString(want))
						}
						seen[a.name+" "+actionString(got)]++
					}
				}
			}
			for _, k := range []string{p.native.name + " allow", p.native.name + " action 0x7fc00000", p.compat[0].name + " allow"} {
				if seen[k] == 0 {
					t.Errorf("no case gave %q: %v", k, seen)
				}
			}
		})
	}
}

// TestReportFSCompatUntouched: under ReportFS the listener only names,
// so the compat entry points' writes and metadata calls, which it cannot
// read, run as they would (the kernel enforces) instead of failing.
func TestReportFSCompatUntouched(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		p := platforms[goarch]
		prog, err := runnerFilter(goarch, RunnerRules{NotifyWrites: true, NotifyMetadata: true, ReportFS: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.compat {
			for nr := range fsTables[goarch][c.audit].calls {
				d := seccompData{nr: int32(nr), arch: c.audit, args: [6]uint64{0, unix.O_WRONLY, unix.O_WRONLY}}
				if got := mustRun(t, prog, d); got != allow && nr != c.ioctl[0] {
					t.Errorf("%s %s write nr %d: %s, want allow", goarch, c.name, nr, actionString(got))
				}
			}
		}
		for nr, call := range fsTables[goarch][p.native.audit].calls {
			if call == FSOpen || call == FSOpenat {
				continue
			}
			d := seccompData{nr: int32(nr), arch: p.native.audit}
			if got := mustRun(t, prog, d); got != uint32(unix.SECCOMP_RET_USER_NOTIF) {
				t.Errorf("%s native %s: %s, want the listener", goarch, call, actionString(got))
			}
		}
	}
}

// TestReportFSMetadata: under ReportFS the metadata calls that name a
// path go to the listener, those on a descriptor run untouched
// (futimens is utimensat with a NULL path).
func TestReportFSMetadata(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		p := platforms[goarch]
		prog, err := runnerFilter(goarch, RunnerRules{NotifyWrites: true, NotifyMetadata: true, ReportFS: true})
		if err != nil {
			t.Fatal(err)
		}
		for nr, c := range metaNative[p.native.audit] {
			for _, path := range []uint64{0, 0x7ffd0000, 0x100000000} {
				d := seccompData{nr: int32(nr), arch: p.native.audit, args: [6]uint64{3, path}}
				want := uint32(unix.SECCOMP_RET_USER_NOTIF)
				if onDescriptor(c) || (c == MetaUtimensat && path == 0) {
					want = allow
				}
				if got := mustRun(t, prog, d); got != want {
					t.Errorf("%s %s path %#x: %s, want %s", goarch, c, path, actionString(got), actionString(want))
				}
			}
		}
	}
}
