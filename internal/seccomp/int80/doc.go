// Package int80 is test support for package seccomp: it makes a system call
// through the i386 compat entry point (int $0x80) from a 64-bit process, so
// a test can prove on a real kernel that a filter covers that entry point
// too. Nothing in corral itself imports it.
package int80
