package seccomp

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// With NotifyMetadata every metadata call of the native entry point (x32's
// numbers too) goes to the listener, every one of a compat entry point
// fails with EPERM, and the socket rules and the terminal rules still hold
// beside them; without it nothing changes for them.
func TestMetadataFilterEveryEntryPoint(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		for _, meta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s meta=%v", goarch, meta), func(t *testing.T) {
				prog, err := runnerFilter(goarch, RunnerRules{NotifyAddresses: true, NotifyMetadata: meta})
				if err != nil {
					t.Fatal(err)
				}
				p := platforms[goarch]
				native := metaNative[p.native.audit]
				if len(native) == 0 {
					t.Fatalf("no metadata calls for %s", p.native.name)
				}
				for nr := uint32(0); nr < 512; nr++ {
					_, isMeta := native[nr]
					want := uint32(unix.SECCOMP_RET_ALLOW)
					if isMeta && meta {
						want = unix.SECCOMP_RET_USER_NOTIF
					}
					if nr == fileSetattr && meta {
						want = eperm
					}
					switch nr {
					case p.native.connect, p.native.bind, p.native.listen:
						want = unix.SECCOMP_RET_USER_NOTIF
					case p.native.sendto, p.native.ioUringSetup, p.native.socketcall:
						continue // argument-dependent: sockets_test.go
					}
					if contains(p.native.sendmsg, nr) || contains(p.native.sendmmsg, nr) || contains(p.native.ioctl, nr) {
						continue
					}
					variants := []int32{int32(nr)}
					if p.native.nrMask != 0 {
						variants = append(variants, int32(nr|x32Bit))
					}
					for _, n := range variants {
						if got := mustRun(t, prog, seccompData{nr: n, arch: p.native.audit}); got != want {
							t.Errorf("%s nr %#x: %s, want %s", p.native.name, n, actionString(got), actionString(want))
						}
					}
				}
				for _, c := range p.compat {
					for _, nr := range metaCompat[c.audit] {
						want := uint32(unix.SECCOMP_RET_ALLOW)
						if meta {
							want = eperm
						}
						if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: c.audit}); got != want {
							t.Errorf("%s nr %d: %s, want %s", c.name, nr, actionString(got), actionString(want))
						}
					}
					for _, nr := range c.ioctl {
						if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: c.audit, args: [6]uint64{3, unix.TIOCSTI}}); got != eperm {
							t.Errorf("%s ioctl TIOCSTI: %s, want EPERM", c.name, actionString(got))
						}
					}
				}
				// The inode flags: chattr's ioctls (the high bits of the
				// request ignored, as the kernel does) and file_setattr,
				// at every entry point; other ioctls pass.
				for _, ab := range append([]abi{p.native}, p.compat...) {
					for _, nr := range ab.ioctl {
						for _, req := range []uint64{fsIocSetflags, fsIoc32Setflags, fsIocFssetxattr, 0xffffffff00000000 | fsIocSetflags} {
							want := uint32(unix.SECCOMP_RET_ALLOW)
							if meta {
								want = eperm
							}
							if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: ab.audit, args: [6]uint64{3, req}}); got != want {
								t.Errorf("%s ioctl %#x: %s, want %s", ab.name, req, actionString(got), actionString(want))
							}
						}
						if got := mustRun(t, prog, seccompData{nr: int32(nr), arch: ab.audit, args: [6]uint64{3, 0x80086601}}); got != unix.SECCOMP_RET_ALLOW {
							t.Errorf("%s ioctl FS_IOC_GETFLAGS: %s, want allow", ab.name, actionString(got))
						}
					}
					want := uint32(unix.SECCOMP_RET_ALLOW)
					if meta {
						want = eperm
					}
					if got := mustRun(t, prog, seccompData{nr: fileSetattr, arch: ab.audit}); got != want {
						t.Errorf("%s file_setattr: %s, want %s", ab.name, actionString(got), actionString(want))
					}
				}
			})
		}
	}
}

// Data.Metadata names what the filter hands over, and nothing else.
func TestMetadataCallNames(t *testing.T) {
	p, err := platformFor(runtime.GOARCH)
	if err != nil {
		t.Skip(err)
	}
	for nr, want := range metaNative[p.native.audit] {
		if got := (Data{Nr: int32(nr), Arch: p.native.audit}).Metadata(); got != want {
			t.Errorf("nr %d: %v, want %v", nr, got, want)
		}
		if p.native.nrMask != 0 {
			if got := (Data{Nr: int32(nr | x32Bit), Arch: p.native.audit}).Metadata(); got != want {
				t.Errorf("x32 nr %d: %v, want %v", nr, got, want)
			}
		}
	}
	for _, c := range p.compat {
		for _, nr := range metaCompat[c.audit] {
			if got := (Data{Nr: int32(nr), Arch: c.audit}).Metadata(); got != MetaOther {
				t.Errorf("%s nr %d: %v, want other (refused by the filter)", c.name, nr, got)
			}
		}
	}
	if got := (Data{Nr: int32(p.native.connect), Arch: p.native.audit}).Metadata(); got != MetaOther {
		t.Errorf("connect: %v, want other", got)
	}
}
