package seccomp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// maxInsns is BPF_MAXINSNS: the kernel refuses a longer classic-BPF program
// with EINVAL.
const maxInsns = 4096

// Offsets into struct seccomp_data (include/uapi/linux/seccomp.h), the only
// buffer a seccomp program may load from: int nr; __u32 arch;
// __u64 instruction_pointer; __u64 args[6].
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

const (
	opLd   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opAnd  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	opJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opJa   = unix.BPF_JMP | unix.BPF_JA
	opRet  = unix.BPF_RET | unix.BPF_K
)

// next is the label that means "the following instruction" in a jump.
const next = -1

// asm is a tiny assembler: jumps name labels, and finish turns them into the
// relative offsets classic BPF wants. Offsets only go forward, which is also
// the only direction classic BPF can jump.
type asm struct {
	ins    []unix.SockFilter
	at     []int // label -> instruction index, -1 until bound
	fixups []fixup
}

type fixup struct {
	pc     int
	jt, jf int // labels, or next
	long   bool
}

func (a *asm) label() int {
	a.at = append(a.at, -1)
	return len(a.at) - 1
}

func (a *asm) bind(l int) { a.at[l] = len(a.ins) }

func (a *asm) stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

// jump emits a conditional jump to label jt when the test holds, else to jf.
func (a *asm) jump(code uint16, k uint32, jt, jf int) {
	a.fixups = append(a.fixups, fixup{pc: len(a.ins), jt: jt, jf: jf})
	a.stmt(code, k)
}

// ja emits an unconditional jump; its 32-bit offset reaches anywhere.
func (a *asm) ja(l int) {
	a.fixups = append(a.fixups, fixup{pc: len(a.ins), jt: l, long: true})
	a.stmt(opJa, 0)
}

func (a *asm) finish() ([]unix.SockFilter, error) {
	if len(a.ins) > maxInsns {
		return nil, fmt.Errorf("seccomp filter of %d instructions exceeds the kernel's limit of %d", len(a.ins), maxInsns)
	}
	off := func(pc, l int) (int, error) {
		if l == next {
			return 0, nil
		}
		if a.at[l] < 0 {
			return 0, errors.New("seccomp assembler: jump to an unbound label")
		}
		d := a.at[l] - pc - 1
		if d < 0 {
			return 0, errors.New("seccomp assembler: backward jump")
		}
		return d, nil
	}
	for _, f := range a.fixups {
		t, err := off(f.pc, f.jt)
		if err != nil {
			return nil, err
		}
		if f.long {
			a.ins[f.pc].K = uint32(t)
			continue
		}
		e, err := off(f.pc, f.jf)
		if err != nil {
			return nil, err
		}
		if t > 255 || e > 255 {
			return nil, errors.New("seccomp assembler: conditional jump longer than 255 instructions")
		}
		a.ins[f.pc].Jt, a.ins[f.pc].Jf = uint8(t), uint8(e)
	}
	return a.ins, nil
}
