package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The kernel runs these programs only on the architecture it was built for,
// so the i386, AArch64 and AArch32 paths cannot all run here. This is a
// classic-BPF interpreter for the instructions seccomp accepts, with the
// kernel's static checks (seccomp_check_filter, bpf_check_classic), run
// against synthetic struct seccomp_data: a test of the program itself.

type seccompData struct {
	nr   int32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	var order binary.ByteOrder = binary.LittleEndian
	if d.arch&auditArchLE == 0 {
		order = binary.BigEndian
	}
	b := make([]byte, 64)
	order.PutUint32(b[0:], uint32(d.nr))
	order.PutUint32(b[4:], d.arch)
	order.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		order.PutUint64(b[16+8*i:], a)
	}
	return b
}

// verify applies the kernel's load-time checks.
func verify(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("length %d", len(prog))
	}
	for pc, in := range prog {
		switch in.Code {
		case opLd:
			if in.K%4 != 0 || in.K+4 > 64 {
				return fmt.Errorf("pc %d: load at %d outside seccomp_data", pc, in.K)
			}
		case opAnd, opRet, unix.BPF_RET | unix.BPF_A:
		case opJa:
			if uint64(pc)+1+uint64(in.K) >= uint64(len(prog)) {
				return fmt.Errorf("pc %d: ja out of program", pc)
			}
		case opJeq, opJset, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			if pc+1+int(in.Jt) >= len(prog) || pc+1+int(in.Jf) >= len(prog) {
				return fmt.Errorf("pc %d: jump out of program", pc)
			}
		default:
			return fmt.Errorf("pc %d: instruction %#x not allowed in seccomp", pc, in.Code)
		}
	}
	if prog[len(prog)-1].Code&0x07 != unix.BPF_RET {
		return errors.New("last instruction is not a return")
	}
	return nil
}

func run(prog []unix.SockFilter, d seccompData) (uint32, error) {
	if err := verify(prog); err != nil {
		return 0, err
	}
	data := d.bytes()
	var order binary.ByteOrder = binary.LittleEndian
	if d.arch&auditArchLE == 0 {
		order = binary.BigEndian
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case opLd:
			acc = order.Uint32(data[in.K:])
		case opAnd:
			acc &= in.K
		case opRet:
			return in.K, nil
		case unix.BPF_RET | unix.BPF_A:
			return acc, nil
		case opJa:
			pc += int(in.K)
		default:
			var taken bool
			switch in.Code {
			case opJeq:
				taken = acc == in.K
			case opJset:
				taken = acc&in.K != 0
			case unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K:
				taken = acc > in.K
			case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
				taken = acc >= in.K
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		}
	}
	return 0, errors.New("fell off the end")
}

func mustRun(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	r, err := run(prog, d)
	if err != nil {
		t.Fatalf("program invalid: %v", err)
	}
	return r
}

func actionString(r uint32) string {
	if r == unix.SECCOMP_RET_ALLOW {
		return "allow"
	}
	if r&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO {
		return "errno " + unix.ErrnoName(unix.Errno(r&unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("action %#x", r)
}

var (
	allow = uint32(unix.SECCOMP_RET_ALLOW)
	eperm = retErrno(unix.EPERM)
)

func TestTerminalFilterEveryEntryPoint(t *testing.T) {
	other := uint64(unix.TIOCGWINSZ)
	const garbage = 0xffffffff00000000
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			prog, err := terminalFilter(goarch)
			if err != nil {
				t.Fatal(err)
			}
			p := platforms[goarch]
			abis := append([]abi{p.native}, p.compat...)
			type tc struct {
				name string
				d    seccompData
				want uint32
			}
			var cases []tc
			for _, a := range abis {
				var nrs []int32
				for _, n := range a.ioctl {
					nrs = append(nrs, int32(n))
					if a.nrMask != 0 {
						nrs = append(nrs, int32(n|x32Bit))
					}
				}
				for _, nr := range nrs {
					for _, req := range []uint64{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSTI | garbage, unix.TIOCLINUX | 0x1234500000000} {
						cases = append(cases, tc{fmt.Sprintf("%s nr %#x req %#x", a.name, nr, req),
							seccompData{nr: nr, arch: a.audit, args: [6]uint64{3, req}}, eperm})
					}
					cases = append(cases,
						tc{fmt.Sprintf("%s nr %#x TIOCGWINSZ", a.name, nr), seccompData{nr: nr, arch: a.audit, args: [6]uint64{3, other}}, allow},
						tc{fmt.Sprintf("%s nr %#x TIOCGWINSZ|garbage", a.name, nr), seccompData{nr: nr, arch: a.audit, args: [6]uint64{3, other | garbage}}, allow},
						// The request in another argument is not a request.
						tc{fmt.Sprintf("%s nr %#x TIOCSTI in args[2]", a.name, nr), seccompData{nr: nr, arch: a.audit, args: [6]uint64{3, other, unix.TIOCSTI}}, allow},
						// Upper bits alone must not make a request match.
						tc{fmt.Sprintf("%s nr %#x TIOCSTI<<32", a.name, nr), seccompData{nr: nr, arch: a.audit, args: [6]uint64{3, unix.TIOCSTI << 32}}, allow},
					)
				}
				// Another call with TIOCSTI's value as its second argument.
				cases = append(cases, tc{a.name + " write(fd, 0x5412)", seccompData{nr: 1, arch: a.audit, args: [6]uint64{3, unix.TIOCSTI}}, allow})
			}
			// The same number means another call under another arch:
			// each ABI's ioctl number, tried under every other ABI.
			for _, a := range abis {
				for _, b := range abis {
					for _, n := range b.ioctl {
						if a.audit == b.audit || contains(a.ioctl, n) {
							continue
						}
						cases = append(cases, tc{fmt.Sprintf("%s nr %d (%s's ioctl)", a.name, n, b.name),
							seccompData{nr: int32(n), arch: a.audit, args: [6]uint64{3, unix.TIOCSTI}}, allow})
					}
				}
			}
			for _, unknown := range []uint32{0, unix.AUDIT_ARCH_PPC64LE, unix.AUDIT_ARCH_RISCV64, unix.AUDIT_ARCH_X86_64 ^ 1} {
				cases = append(cases, tc{fmt.Sprintf("unknown arch %#x", unknown),
					seccompData{nr: 16, arch: unknown, args: [6]uint64{3, unix.TIOCSTI}}, allow})
			}
			for _, c := range cases {
				if got := mustRun(t, prog, c.d); got != c.want {
					t.Errorf("%s: %s, want %s", c.name, actionString(got), actionString(c.want))
				}
			}
		})
	}
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestBuildRules(t *testing.T) {
	rules := []Rule{
		{Syscall: 272, Match: AnyBits, Arg: 0, Value: unix.CLONE_NEWNS | unix.CLONE_NEWUSER, Errno: unix.EPERM},
		{Syscall: 435, Errno: unix.ENOSYS},
		{Syscall: 110, Match: AnyBits, Arg: 5, Value: 1 << 40, Errno: unix.ERANGE},
		{Syscall: 39, Match: Low32, Arg: 0, Value: 0x1234, Errno: unix.EXDEV},
		// Never reached for 39/0x1234: the first matching rule decides.
		{Syscall: 39, Errno: unix.EDOM},
	}
	prog, err := build("amd64", rules)
	if err != nil {
		t.Fatal(err)
	}
	x86 := uint32(unix.AUDIT_ARCH_X86_64)
	cases := []struct {
		d    seccompData
		want uint32
	}{
		{seccompData{nr: 272, arch: x86, args: [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{seccompData{nr: 272, arch: x86, args: [6]uint64{unix.CLONE_NEWNS | unix.CLONE_NEWNET}}, eperm},
		{seccompData{nr: 272 | x32Bit, arch: x86, args: [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{seccompData{nr: 272, arch: x86, args: [6]uint64{unix.CLONE_NEWNET}}, allow},
		{seccompData{nr: 272, arch: x86, args: [6]uint64{0, unix.CLONE_NEWUSER}}, allow},
		// i386 compat is left alone by Build (its 272 is another call anyway).
		{seccompData{nr: 272, arch: unix.AUDIT_ARCH_I386, args: [6]uint64{unix.CLONE_NEWUSER}}, allow},
		{seccompData{nr: 435, arch: x86}, retErrno(unix.ENOSYS)},
		{seccompData{nr: 110, arch: x86, args: [6]uint64{5: 1 << 40}}, retErrno(unix.ERANGE)},
		{seccompData{nr: 110, arch: x86, args: [6]uint64{5: 1<<40 - 1}}, allow},
		{seccompData{nr: 110, arch: x86, args: [6]uint64{4: 1 << 40}}, allow},
		{seccompData{nr: 39, arch: x86, args: [6]uint64{0x1234}}, retErrno(unix.EXDEV)},
		{seccompData{nr: 39, arch: x86, args: [6]uint64{0xdead00001234}}, retErrno(unix.EXDEV)},
		{seccompData{nr: 39, arch: x86, args: [6]uint64{0x1235}}, retErrno(unix.EDOM)},
		{seccompData{nr: 0, arch: x86}, allow},
	}
	for _, c := range cases {
		if got := mustRun(t, prog, c.d); got != c.want {
			t.Errorf("nr %#x arch %#x args %#x: %s, want %s", c.d.nr, c.d.arch, c.d.args, actionString(got), actionString(c.want))
		}
	}

	// The same rule numbers on arm64 have no x32 bit to clear.
	prog, err = build("arm64", rules[:1])
	if err != nil {
		t.Fatal(err)
	}
	arm := uint32(unix.AUDIT_ARCH_AARCH64)
	if got := mustRun(t, prog, seccompData{nr: 272, arch: arm, args: [6]uint64{unix.CLONE_NEWUSER}}); got != eperm {
		t.Errorf("arm64 rule: %s", actionString(got))
	}
	if got := mustRun(t, prog, seccompData{nr: 272 | x32Bit, arch: arm, args: [6]uint64{unix.CLONE_NEWUSER}}); got != allow {
		t.Errorf("arm64 with bit 30 set: %s, want allow", actionString(got))
	}
}

func TestBuildRejects(t *testing.T) {
	for _, c := range []struct {
		goarch string
		rule   Rule
		want   string
	}{
		{"amd64", Rule{Syscall: 1, Errno: 0}, "errno 0"},
		{"amd64", Rule{Syscall: 1, Errno: 4096}, "errno 4096"},
		{"amd64", Rule{Syscall: 1, Match: AnyBits, Arg: 6, Value: 1, Errno: unix.EPERM}, "argument index 6"},
		{"amd64", Rule{Syscall: 1, Match: Low32, Arg: -1, Errno: unix.EPERM}, "argument index -1"},
		{"amd64", Rule{Syscall: 1, Match: AnyBits, Arg: 0, Errno: unix.EPERM}, "empty mask"},
		{"amd64", Rule{Syscall: 1, Match: 9, Errno: unix.EPERM}, "unknown match"},
		{"amd64", Rule{Syscall: 1 | x32Bit, Errno: unix.EPERM}, "not a native x86_64 number"},
		{"amd64", Rule{Syscall: 1 << 33, Errno: unix.EPERM}, "does not fit"},
		{"riscv64", Rule{Syscall: 1, Errno: unix.EPERM}, "amd64 and arm64 only"},
	} {
		_, err := build(c.goarch, []Rule{c.rule})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want one containing %q", c.goarch, c.rule, err, c.want)
		}
	}
	// A filter that cannot fit in the kernel's limit is refused here, not
	// by an EINVAL at install time.
	many := make([]Rule, 1100)
	for i := range many {
		many[i] = Rule{Syscall: uintptr(i), Match: Low32, Arg: 1, Value: 7, Errno: unix.EPERM}
	}
	if _, err := build("amd64", many); err == nil || !strings.Contains(err.Error(), "limit of 4096") {
		t.Errorf("oversized filter: %v", err)
	}
}

// A program larger than a conditional jump's reach (255) still dispatches
// every arch right: the arch jumps go through JA.
func TestLongProgram(t *testing.T) {
	rules := make([]Rule, 300)
	for i := range rules {
		rules[i] = Rule{Syscall: uintptr(i), Match: AnyBits, Arg: i % 6, Value: 1 << (i % 64), Errno: unix.Errno(1 + i%100)}
	}
	p := platforms["amd64"]
	prog, err := assemble([]block{{abi: p.native, rules: rules}, {abi: p.compat[0], rules: terminalRules(p.compat[0])}})
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) < 1000 {
		t.Fatalf("only %d instructions: the test means to exceed jump reach", len(prog))
	}
	for i, r := range rules {
		d := seccompData{nr: int32(i), arch: p.native.audit}
		d.args[r.Arg] = r.Value
		if got := mustRun(t, prog, d); got != retErrno(r.Errno) {
			t.Fatalf("rule %d: %s", i, actionString(got))
		}
		d.args[r.Arg] = ^r.Value
		if got := mustRun(t, prog, d); got != allow {
			t.Fatalf("rule %d, other bits: %s", i, actionString(got))
		}
	}
	if got := mustRun(t, prog, seccompData{nr: 54, arch: unix.AUDIT_ARCH_I386, args: [6]uint64{0, unix.TIOCSTI}}); got != eperm {
		t.Fatalf("i386 block after a long native block: %s", actionString(got))
	}
}

// reference says what rules mean, without BPF: the first rule whose
// syscall and match hold decides; anything else, and any foreign arch, is
// allowed.
func reference(a abi, rules []Rule, d seccompData) uint32 {
	if d.arch != a.audit {
		return allow
	}
	nr := uint32(d.nr)
	if a.nrMask != 0 {
		nr &= a.nrMask
	}
	for _, r := range rules {
		if uint32(r.Syscall) != nr {
			continue
		}
		switch r.Match {
		case Always:
			return retErrno(r.Errno)
		case AnyBits:
			if d.args[r.Arg]&r.Value != 0 {
				return retErrno(r.Errno)
			}
		case Low32:
			if uint32(d.args[r.Arg]) == uint32(r.Value) {
				return retErrno(r.Errno)
			}
		}
	}
	return allow
}

// FuzzBuild: for any rules Build accepts and any seccomp_data, the program
// passes the kernel's static checks and decides exactly as reference does.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 2, 1, 0, 3, 0x40, 0x12, 0x54}, uint8(1), uint64(0x5412), uint64(0), true, false)
	f.Add([]byte{2, 1, 1, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x10}, uint8(2), uint64(1<<40), uint64(0xffffffff00000000), false, true)
	f.Fuzz(func(t *testing.T, spec []byte, nr uint8, a0, a1 uint64, native, x32 bool) {
		var rules []Rule
		for len(spec) >= 4 && len(rules) < 40 {
			r := Rule{
				Syscall: uintptr(spec[0] % 8),
				Match:   Match(spec[1] % 3),
				Arg:     int(spec[2] % 3),
				Errno:   unix.Errno(1 + int(spec[3])),
			}
			spec = spec[4:]
			if r.Match != Always {
				var v [8]byte
				n := copy(v[:], spec)
				spec = spec[n:]
				r.Value = binary.LittleEndian.Uint64(v[:])
			}
			rules = append(rules, r)
		}
		goarch := "amd64"
		if nr&0x80 != 0 {
			goarch = "arm64"
		}
		p := platforms[goarch]
		prog, err := build(goarch, rules)
		for _, r := range rules {
			if r.Match == AnyBits && r.Value == 0 {
				if err == nil {
					t.Fatal("an empty AnyBits mask was accepted")
				}
				return
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		d := seccompData{nr: int32(nr % 8), arch: p.native.audit, args: [6]uint64{a0, a1, a0 ^ a1}}
		if x32 {
			d.nr |= x32Bit
		}
		if !native {
			d.arch = p.compat[0].audit
		}
		got, err := run(prog, d)
		if err != nil {
			t.Fatal(err)
		}
		if want := reference(p.native, rules, d); got != want {
			t.Fatalf("%s rules %+v data %+v: %s, want %s", goarch, rules, d, actionString(got), actionString(want))
		}
	})
}
