// Raw forks for the benchmark runner: see fork.go. The children run only
// this code and never return into Go.

#include "textflag.h"

#define SYS_close 57
#define SYS_write 64
#define SYS_ppoll 73
#define SYS_exit_group 94
#define SYS_rt_sigaction 134
#define SYS_rt_sigprocmask 135
#define SYS_setsid 157
#define SYS_prctl 167
#define SYS_clone 220
#define SYS_close_range 436

#define SIGCHLD 17
#define CLONE_VM 0x100
#define CLONE_VFORK 0x4000
#define SIGKILL 9
#define SIGTERM 15
#define SIG_SETMASK 2
#define PR_SET_PDEATHSIG 1

// clone(SIGCHLD, 0, 0, 0, 0): a plain fork. R0: 0 in the child, the pid (or
// -errno) in the parent.
#define FORK \
	MOVD	$SIGCHLD, R0; \
	MOVD	$0, R1; \
	MOVD	$0, R2; \
	MOVD	$0, R3; \
	MOVD	$0, R4; \
	MOVD	$SYS_clone, R8; \
	SVC

// Block forever: ppoll with no descriptors, no timeout and no mask.
#define BLOCK_FOREVER(label) \
label: \
	MOVD	$0, R0; \
	MOVD	$0, R1; \
	MOVD	$0, R2; \
	MOVD	$0, R3; \
	MOVD	$0, R4; \
	MOVD	$SYS_ppoll, R8; \
	SVC; \
	JMP	label

// close_range(0, ~0U, 0); before Linux 5.9, close 0, 1 and 2 at least.
#define CLOSE_ALL(label) \
	MOVD	$0, R0; \
	MOVD	$0xffffffff, R1; \
	MOVD	$0, R2; \
	MOVD	$SYS_close_range, R8; \
	SVC; \
	CMP	$0, R0; \
	BEQ	label; \
	MOVD	$0, R0; \
	MOVD	$SYS_close, R8; \
	SVC; \
	MOVD	$1, R0; \
	MOVD	$SYS_close, R8; \
	SVC; \
	MOVD	$2, R0; \
	MOVD	$SYS_close, R8; \
	SVC; \
label:

// func orphan() (pid int, errno int)
//
// The intermediate is a vfork (CLONE_VM|CLONE_VFORK: no copy of the page
// tables, the caller is suspended until it exits), and the grandchild shares
// that memory too (CLONE_VM): both run on this stack, so after the clone
// neither touches memory, only registers, and every signal is blocked
// across it (as Go's own fork does) so no handler can run on that stack.
TEXT ·orphan(SB), NOSPLIT, $16-16
	// rt_sigprocmask(SIG_SETMASK, every signal, &old, 8)
	MOVD	$-1, R1
	MOVD	R1, all-16(SP)
	MOVD	$SIG_SETMASK, R0
	MOVD	$all-16(SP), R1
	MOVD	$old-8(SP), R2
	MOVD	$8, R3
	MOVD	$SYS_rt_sigprocmask, R8
	SVC

	MOVD	$(CLONE_VM|CLONE_VFORK|SIGCHLD), R0
	MOVD	$0, R1
	MOVD	$0, R2
	MOVD	$0, R3
	MOVD	$0, R4
	MOVD	$SYS_clone, R8
	SVC
	CMP	$0, R0
	BEQ	intermediate
	MOVD	R0, R19

	// Restore the caller's signal mask.
	MOVD	$SIG_SETMASK, R0
	MOVD	$old-8(SP), R1
	MOVD	$0, R2
	MOVD	$8, R3
	MOVD	$SYS_rt_sigprocmask, R8
	SVC

	CMP	$0, R19
	BLT	failed
	MOVD	R19, pid+0(FP)
	MOVD	$0, R1
	MOVD	R1, errno+8(FP)
	RET

failed:
	NEG	R19, R19
	MOVD	$-1, R1
	MOVD	R1, pid+0(FP)
	MOVD	R19, errno+8(FP)
	RET

intermediate:
	MOVD	$(CLONE_VM|SIGCHLD), R0
	MOVD	$0, R1
	MOVD	$0, R2
	MOVD	$0, R3
	MOVD	$0, R4
	MOVD	$SYS_clone, R8
	SVC
	// The grandchild (R0 == 0) and the intermediate both exit at once; the
	// intermediate exits 1 if it could not fork.
	CMP	$0, R0
	MOVD	$0, R0
	BGE	exit
	MOVD	$1, R0

exit:
	MOVD	$SYS_exit_group, R8
	SVC
	JMP	exit

// func detached(handler uintptr, readyFD int) (pid int, errno int)
TEXT ·detached(SB), NOSPLIT, $48-32
	MOVD	handler+0(FP), R19
	MOVD	readyFD+8(FP), R20
	FORK
	CMP	$0, R0
	BEQ	intermediate
	BLT	failed
	MOVD	R0, pid+16(FP)
	MOVD	$0, R1
	MOVD	R1, errno+24(FP)
	RET

failed:
	NEG	R0, R0
	MOVD	$-1, R1
	MOVD	R1, pid+16(FP)
	MOVD	R0, errno+24(FP)
	RET

intermediate:
	FORK
	CMP	$0, R0
	BEQ	helper
	MOVD	$0, R0
	BGT	exit
	MOVD	$1, R0

exit:
	MOVD	$SYS_exit_group, R8
	SVC
	JMP	exit

helper:
	MOVD	$SYS_setsid, R8
	SVC

	// rt_sigaction(SIGTERM, {handler, 0, 0, 0}, NULL, 8)
	MOVD	R19, sa-48(SP)
	MOVD	ZR, saflags-40(SP)
	MOVD	ZR, sarestorer-32(SP)
	MOVD	ZR, samask-24(SP)
	MOVD	$SIGTERM, R0
	MOVD	$sa-48(SP), R1
	MOVD	$0, R2
	MOVD	$8, R3
	MOVD	$SYS_rt_sigaction, R8
	SVC

	// rt_sigprocmask(SIG_SETMASK, every signal but SIGTERM, NULL, 8)
	MOVD	$-16385, R1
	MOVD	R1, mask-16(SP)
	MOVD	$SIG_SETMASK, R0
	MOVD	$mask-16(SP), R1
	MOVD	$0, R2
	MOVD	$8, R3
	MOVD	$SYS_rt_sigprocmask, R8
	SVC

	// write(readyFD, "\x01", 1)
	MOVD	$1, R1
	MOVB	R1, byte-8(SP)
	MOVD	R20, R0
	MOVD	$byte-8(SP), R1
	MOVD	$1, R2
	MOVD	$SYS_write, R8
	SVC

	CLOSE_ALL(closed)
	BLOCK_FOREVER(block)

// func sleeper() (pid int, errno int)
TEXT ·sleeper(SB), NOSPLIT, $16-16
	FORK
	CMP	$0, R0
	BEQ	child
	BLT	failed
	MOVD	R0, pid+0(FP)
	MOVD	$0, R1
	MOVD	R1, errno+8(FP)
	RET

failed:
	NEG	R0, R0
	MOVD	$-1, R1
	MOVD	R1, pid+0(FP)
	MOVD	R0, errno+8(FP)
	RET

child:
	// prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
	MOVD	$PR_SET_PDEATHSIG, R0
	MOVD	$SIGKILL, R1
	MOVD	$0, R2
	MOVD	$0, R3
	MOVD	$0, R4
	MOVD	$SYS_prctl, R8
	SVC

	// rt_sigprocmask(SIG_SETMASK, every signal, NULL, 8)
	MOVD	$-1, R1
	MOVD	R1, mask-8(SP)
	MOVD	$SIG_SETMASK, R0
	MOVD	$mask-8(SP), R1
	MOVD	$0, R2
	MOVD	$8, R3
	MOVD	$SYS_rt_sigprocmask, R8
	SVC

	CLOSE_ALL(closed)
	BLOCK_FOREVER(block)
