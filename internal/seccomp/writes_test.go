package seccomp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/test/int80"
)

func init() {
	scenarios["writes-i386"] = scenarioWritesI386
}

// writesReference says what NotifyWrites means, without BPF: at a routed
// entry point, a write-intent call goes to the listener (an open only
// with a write flag in its flag word's low 32 bits); at a compat one it
// fails with EACCES; anything else is allowed.
func writesReference(a abi, d seccompData) uint32 {
	t, ok := fsTables[goarchOf(a)][a.audit]
	if !ok || d.arch != a.audit {
		return allow
	}
	nr := uint32(d.nr)
	if a.nrMask != 0 {
		nr &= a.nrMask
	}
	c, ok := t.calls[nr]
	if !ok {
		return allow
	}
	hit := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if !t.route {
		hit = retErrno(unix.EACCES)
	}
	switch c {
	case FSOpen:
		if uint32(d.args[1])&WriteFlags == 0 {
			return allow
		}
	case FSOpenat:
		if uint32(d.args[2])&WriteFlags == 0 {
			return allow
		}
	}
	return hit
}

func goarchOf(a abi) string {
	for g, p := range platforms {
		if p.native.audit == a.audit {
			return g
		}
		for _, c := range p.compat {
			if c.audit == a.audit {
				return g
			}
		}
	}
	return ""
}

func TestWritesFilterEveryEntryPoint(t *testing.T) {
	const garbage = 0xffffffff00000000
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			prog, err := runnerFilter(goarch, RunnerRules{NotifyAddresses: true, NotifyWrites: true})
			if err != nil {
				t.Fatal(err)
			}
			p := platforms[goarch]
			abis := append([]abi{p.native}, p.compat...)
			seen := map[string]int{}
			for _, a := range abis {
				var nrs []uint32
				for _, b := range abis {
					for nr := range fsTables[goarch][b.audit].calls {
						nrs = append(nrs, nr)
					}
				}
				nrs = append(nrs, 0, 1, 3, 4)
				for _, nr := range nrs {
					variants := []int32{int32(nr)}
					if a.nrMask != 0 {
						variants = append(variants, int32(nr|x32Bit))
					}
					for _, n := range variants {
						for _, fl := range []uint64{unix.O_RDONLY, unix.O_RDONLY | unix.O_CLOEXEC | unix.O_DIRECTORY, unix.O_WRONLY, unix.O_RDWR,
							unix.O_CREAT, unix.O_TRUNC, unix.O_TMPFILE | unix.O_WRONLY, unix.O_RDONLY | garbage, unix.O_WRONLY | garbage, unix.O_APPEND} {
							for _, args := range [][6]uint64{{0, fl, 0o644}, {unix.AT_FDCWD & 0xffffffff, 0, fl, 0o644}} {
								d := seccompData{nr: n, arch: a.audit, args: args}
								want := writesReference(a, d)
								if want == allow {
									// Beside the write rules, the address
									// rules (connect, io_uring, ...) apply.
									want = socketReference(a, &SocketRules{}, true, d)
									if nr := uint32(n) & maskOf(a); nr == a.connect || nr == a.bind || nr == a.listen {
										want = uint32(unix.SECCOMP_RET_USER_NOTIF)
									}
									if nr := uint32(n) & maskOf(a); nr == a.socket || nr == a.socketpair || nr == a.sendto || contains(a.sendmsg, nr) || contains(a.sendmmsg, nr) {
										continue // the socket rules' own test covers them
									}
								}
								got := mustRun(t, prog, d)
								if got != want {
									t.Fatalf("%s nr %#x args %#x: %s, want %s", a.name, d.nr, d.args[:3], actionString(got), actionString(want))
								}
								seen[fmt.Sprintf("%s %s", a.name, actionString(got))]++
							}
						}
					}
				}
			}
			for _, k := range []string{p.native.name + " allow", p.native.name + " action 0x7fc00000", p.compat[0].name + " errno EACCES", p.compat[0].name + " allow"} {
				if seen[k] == 0 {
					t.Errorf("no case gave %q: %v", k, seen)
				}
			}
		})
	}
}

func maskOf(a abi) uint32 {
	if a.nrMask != 0 {
		return a.nrMask
	}
	return ^uint32(0)
}

func TestWritesFilterI386(t *testing.T) {
	requireInt80(t)
	runChild(t, "writes-i386", nil)
}

// scenarioWritesI386: the i386 entry points of the write-intent calls,
// which the supervisor does not route, are refused; a read-only open
// there still works.
func scenarioWritesI386(c *child) {
	const i386Open, i386Mkdir = 5, 39
	dir, err := os.MkdirTemp("", "writes-i386")
	if err != nil {
		c.fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	page, err := int80.LowPage()
	if err != nil {
		c.fatalf("a page below 4 GiB: %v", err)
	}
	str := func(s string) uintptr {
		copy(page, s+"\x00")
		return uintptr(unsafe.Pointer(&page[0]))
	}
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		c.fatalf("%v", err)
	}
	installRunner(c, RunnerRules{NotifyAddresses: true, NotifyWrites: true})
	if fd, e := int80.Syscall(i386Open, str(f), unix.O_RDONLY, 0); e != 0 {
		c.errorf("i386 open read-only under the filter: %v", e)
	} else {
		unix.Close(int(fd))
	}
	if _, e := int80.Syscall(i386Open, str(f), unix.O_WRONLY, 0); e != unix.EACCES {
		c.errorf("i386 open for writing under the filter: %v, want EACCES", e)
	}
	if _, e := int80.Syscall(i386Mkdir, str(filepath.Join(dir, "d")), 0o755, 0); e != unix.EACCES {
		c.errorf("i386 mkdir under the filter: %v, want EACCES", e)
	}
}
