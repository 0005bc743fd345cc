// Package int80 is test support for package seccomp: it makes a system call
// through the i386 compat entry point (int $0x80) from a 64-bit process, so
// a test can prove on a real kernel that a filter covers that entry point
// too. Only tests import it, so the corral binary does not contain it.
//
// On a kernel without the i386 entry point (CONFIG_IA32_EMULATION off, or
// booted with ia32_emulation=0) int $0x80 is a general-protection fault: the
// process dies of SIGSEGV. Probe it in a throwaway process.
package int80
