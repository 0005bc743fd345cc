// Raw forks for the benchmark runner: see fork.go. The children run only
// this code and never return into Go.

#include "textflag.h"

#define SYS_write 1
#define SYS_close 3
#define SYS_rt_sigaction 13
#define SYS_rt_sigprocmask 14
#define SYS_clone 56
#define SYS_setsid 112
#define SYS_prctl 157
#define SYS_exit_group 231
#define SYS_ppoll 271
#define SYS_close_range 436

#define SIGCHLD 17
#define CLONE_VM 0x100
#define CLONE_VFORK 0x4000
#define SIGKILL 9
#define SIGTERM 15
#define SIG_SETMASK 2
#define PR_SET_PDEATHSIG 1

// clone(SIGCHLD, 0, 0, 0, 0): a plain fork. AX: 0 in the child, the pid (or
// -errno) in the parent.
#define FORK \
	MOVQ	$SIGCHLD, DI; \
	XORQ	SI, SI; \
	XORQ	DX, DX; \
	XORQ	R10, R10; \
	XORQ	R8, R8; \
	MOVQ	$SYS_clone, AX; \
	SYSCALL

// Block forever: ppoll with no descriptors, no timeout and no mask.
#define BLOCK_FOREVER(label) \
label: \
	XORQ	DI, DI; \
	XORQ	SI, SI; \
	XORQ	DX, DX; \
	XORQ	R10, R10; \
	XORQ	R8, R8; \
	MOVQ	$SYS_ppoll, AX; \
	SYSCALL; \
	JMP	label

// close_range(0, ~0U, 0); before Linux 5.9, close 0, 1 and 2 at least.
#define CLOSE_ALL(label) \
	XORQ	DI, DI; \
	MOVL	$0xffffffff, SI; \
	XORQ	DX, DX; \
	MOVQ	$SYS_close_range, AX; \
	SYSCALL; \
	CMPQ	AX, $0; \
	JEQ	label; \
	MOVQ	$0, DI; \
	MOVQ	$SYS_close, AX; \
	SYSCALL; \
	MOVQ	$1, DI; \
	MOVQ	$SYS_close, AX; \
	SYSCALL; \
	MOVQ	$2, DI; \
	MOVQ	$SYS_close, AX; \
	SYSCALL; \
label:

// func orphan() (pid int, errno int)
//
// The intermediate is a vfork (CLONE_VM|CLONE_VFORK: no copy of the page
// tables, the caller is suspended until it exits), and the grandchild shares
// that memory too (CLONE_VM): both run on this stack, so after the clone
// neither touches memory, only registers, and every signal is blocked
// across it (as Go's own fork does) so no handler can run on that stack.
TEXT ·orphan(SB), NOSPLIT, $16-16
	// rt_sigprocmask(SIG_SETMASK, every signal, old mask at 8(SP), 8)
	MOVQ	$-1, 0(SP)
	MOVQ	$SIG_SETMASK, DI
	LEAQ	0(SP), SI
	LEAQ	8(SP), DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL

	MOVQ	$(CLONE_VM|CLONE_VFORK|SIGCHLD), DI
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$SYS_clone, AX
	SYSCALL
	CMPQ	AX, $0
	JEQ	intermediate
	MOVQ	AX, R12

	// Restore the caller's signal mask.
	MOVQ	$SIG_SETMASK, DI
	LEAQ	8(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL

	CMPQ	R12, $0
	JLT	failed
	MOVQ	R12, pid+0(FP)
	MOVQ	$0, errno+8(FP)
	RET

failed:
	NEGQ	R12
	MOVQ	$-1, pid+0(FP)
	MOVQ	R12, errno+8(FP)
	RET

intermediate:
	MOVQ	$(CLONE_VM|SIGCHLD), DI
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$SYS_clone, AX
	SYSCALL
	// The grandchild (AX == 0) and the intermediate both exit at once; the
	// intermediate exits 1 if it could not fork.
	XORQ	DI, DI
	CMPQ	AX, $0
	JGE	exit
	MOVQ	$1, DI

exit:
	MOVQ	$SYS_exit_group, AX
	SYSCALL
	JMP	exit

// func detached(handler uintptr, readyFD int) (pid int, errno int)
TEXT ·detached(SB), NOSPLIT, $48-32
	MOVQ	handler+0(FP), R12
	MOVQ	readyFD+8(FP), R13
	FORK
	CMPQ	AX, $0
	JEQ	intermediate
	JLT	failed
	MOVQ	AX, pid+16(FP)
	MOVQ	$0, errno+24(FP)
	RET

failed:
	NEGQ	AX
	MOVQ	$-1, pid+16(FP)
	MOVQ	AX, errno+24(FP)
	RET

intermediate:
	FORK
	CMPQ	AX, $0
	JEQ	helper
	XORQ	DI, DI
	CMPQ	AX, $0
	JGT	exit
	MOVQ	$1, DI

exit:
	MOVQ	$SYS_exit_group, AX
	SYSCALL
	JMP	exit

helper:
	MOVQ	$SYS_setsid, AX
	SYSCALL

	// rt_sigaction(SIGTERM, {handler, 0, 0, 0}, NULL, 8)
	MOVQ	R12, 0(SP)
	MOVQ	$0, 8(SP)
	MOVQ	$0, 16(SP)
	MOVQ	$0, 24(SP)
	MOVQ	$SIGTERM, DI
	LEAQ	0(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigaction, AX
	SYSCALL

	// rt_sigprocmask(SIG_SETMASK, every signal but SIGTERM, NULL, 8)
	MOVQ	$-16385, 32(SP)
	MOVQ	$SIG_SETMASK, DI
	LEAQ	32(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL

	// write(readyFD, "\x01", 1)
	MOVB	$1, 40(SP)
	MOVQ	R13, DI
	LEAQ	40(SP), SI
	MOVQ	$1, DX
	MOVQ	$SYS_write, AX
	SYSCALL

	CLOSE_ALL(closed)
	BLOCK_FOREVER(block)

// func sleeper() (pid int, errno int)
TEXT ·sleeper(SB), NOSPLIT, $16-16
	FORK
	CMPQ	AX, $0
	JEQ	child
	JLT	failed
	MOVQ	AX, pid+0(FP)
	MOVQ	$0, errno+8(FP)
	RET

failed:
	NEGQ	AX
	MOVQ	$-1, pid+0(FP)
	MOVQ	AX, errno+8(FP)
	RET

child:
	// prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
	MOVQ	$PR_SET_PDEATHSIG, DI
	MOVQ	$SIGKILL, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$SYS_prctl, AX
	SYSCALL

	// rt_sigprocmask(SIG_SETMASK, every signal, NULL, 8)
	MOVQ	$-1, 0(SP)
	MOVQ	$SIG_SETMASK, DI
	LEAQ	0(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL

	CLOSE_ALL(closed)
	BLOCK_FOREVER(block)
