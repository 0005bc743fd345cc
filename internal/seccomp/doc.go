// Package seccomp assembles classic-BPF seccomp filters in pure Go (no
// libseccomp, no cgo) and installs them on the calling OS thread.
//
// It owns three things:
//
//   - RunnerFilter: the one filter corral puts on the runner's thread
//     just before its execve, so that ioctl(TIOCSTI) and ioctl(TIOCLINUX)
//     fail with EPERM for the runner and everything it starts (the
//     CVE-2017-5226 class: a sandboxed command queueing input into the
//     caller's shell), and, with SocketRules, so that only the sockets a
//     network policy admits can be created (AF_UNIX, AF_NETLINK, and TCP
//     when asked). It covers every system-call entry point of the
//     architecture corral runs on (x86_64, its x32 numbers and the i386
//     compat entry on amd64; AArch64 and the AArch32 compat entry on arm64).
//   - RunnerRules.DenyVsock and NotifyAddresses: socket(AF_VSOCK) refused,
//     and connect, bind, listen and sendto-with-an-address handed to a
//     supervisor by user notification (SECCOMP_RET_USER_NOTIF), with the
//     primitives that supervisor needs: InstallWithListener, Receive,
//     Readable, IDValid, Respond (ErrGone when the caller is no longer
//     waiting), ReadMemory (process_vm_readv), OpenPidfd and GetFD
//     (pidfd_getfd). The checks themselves are sandbox/internal/sockcheck's.
//   - Build: a small general builder ("syscall X fails with errno E, always
//     or when an argument matches") for narrow filters such as test jails.
//   - InstallOnThread and Probe: installing a program on the calling thread
//     only, and learning without side effects whether that can work here.
//
// What the caller must do: lock its goroutine to its OS thread
// (runtime.LockOSThread) before InstallOnThread, because a seccomp filter is
// a property of one thread and a Go goroutine otherwise migrates between
// threads; set no_new_privs on that same thread first (or hold
// CAP_SYS_ADMIN), as the kernel demands; and then execve from that thread.
// The filter is inherited across fork and execve and can never be removed.
//
// The package holds no policy: which filter to install, and what a failure
// means for the run (an exit 125, or the documented --allow-new-privs
// exception), is the caller's business.
package seccomp
