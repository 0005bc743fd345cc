package sandbox

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS

func TestRefusalHintFromWhatCorralSees(t *testing.T) {
	allCaps := ^uint64(0)
	for _, tc := range []struct {
		name   string
		f      facts
		step   string
		err    error
		flags  uintptr
		userns bool
		want   []string
		not    []string
	}{
		{
			name: "seccomp filter, no sysctl on this kernel",
			f:    facts{uid: 1000, seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"Seccomp: 2", "RuntimeDefault", "seccomp=unconfined"},
			not:  []string{"unprivileged_userns_clone", "apparmor", "subreaper"},
		},
		{
			name: "the Debian sysctl, where it exists and forbids",
			f:    facts{uid: 1000, seccomp: "0", sysctls: map[string]string{"kernel.unprivileged_userns_clone": "0", "kernel.apparmor_restrict_unprivileged_userns": "0"}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"kernel.unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1"},
			not:  []string{"seccomp", "apparmor"},
		},
		{
			name: "AppArmor's restriction",
			f:    facts{uid: 1000, seccomp: "0", sysctls: map[string]string{"kernel.apparmor_restrict_unprivileged_userns": "1"}},
			step: "clone(CLONE_NEWUSER)", err: unix.EACCES, flags: nsFlags, userns: true,
			want: []string{"kernel.apparmor_restrict_unprivileged_userns is 1"},
			not:  []string{"unprivileged_userns_clone is"},
		},
		{
			name: "nothing visible",
			f:    facts{uid: 1000, seccomp: "0", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"none of the usual causes is visible"},
		},
		{
			name: "uid 0 without CAP_SETFCAP",
			f:    facts{uid: 0, sysctls: map[string]string{}},
			step: `map uid 0 to itself (write "0 0 1" to /proc/PID/uid_map)`, err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"uid 0 without CAP_SETFCAP cannot map itself", "Linux 5.12", "SETFCAP", "runAsUser"},
		},
		{
			name: "uid 0 with CAP_SETFCAP: something else refused the map",
			f:    facts{uid: 0, caps: 1 << uint(capability.CAP_SETFCAP), sysctls: map[string]string{}},
			step: `map uid 0 to itself (write "0 0 1" to /proc/PID/uid_map)`, err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"refused to map uid 0"},
			not:  []string{"without CAP_SETFCAP"},
		},
		{
			name: "ENOSPC names the count that is 0",
			f:    facts{uid: 1000, sysctls: map[string]string{"user.max_user_namespaces": "63000", "user.max_pid_namespaces": "0", "user.max_mnt_namespaces": "63000"}},
			step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", err: unix.ENOSPC, flags: nsFlags, userns: true,
			want: []string{"user.max_pid_namespaces is 0"},
			not:  []string{"max_user_namespaces is", "max_mnt"},
		},
		{
			name: "ENOSPC with nothing at 0: the counts and the nesting depth",
			f:    facts{uid: 1000, sysctls: map[string]string{"user.max_user_namespaces": "5", "user.max_pid_namespaces": "5", "user.max_mnt_namespaces": "5", "user.max_net_namespaces": "0"}},
			step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", err: unix.ENOSPC, flags: nsFlags, userns: true,
			want: []string{"user.max_user_namespaces=5", "32 deep"},
			not:  []string{"max_net"}, // not asked for: no --net none
		},
		{
			name: "root with CAP_SYS_ADMIN under a custom filter",
			f:    facts{uid: 0, caps: allCaps, seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWPID|CLONE_NEWNS)", err: unix.EPERM, flags: unix.CLONE_NEWPID | unix.CLONE_NEWNS,
			want: []string{"Seccomp: 2"},
			not:  []string{"RuntimeDefault", "without CAP_SYS_ADMIN"},
		},
		{
			name: "root without CAP_SYS_ADMIN is told how to need no user namespace",
			f:    facts{uid: 0, caps: 1 << uint(capability.CAP_SETFCAP), seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"--cap-add SYS_ADMIN", "RuntimeDefault"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refusalHint(tc.f, tc.step, tc.err, tc.flags, tc.userns)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint lacks %q: %q", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("hint has %q: %q", n, got)
				}
			}
		})
	}
}

func TestProcMountHintFitsTheCaller(t *testing.T) {
	root := procMountHint(facts{uid: 0, caps: 1 << uint(capability.CAP_SETFCAP)})
	for _, w := range []string{"lacks CAP_SYS_ADMIN", "--cap-add SYS_ADMIN", "systempaths=unconfined", "procMount: Unmasked"} {
		if !strings.Contains(root, w) {
			t.Errorf("uid 0 hint lacks %q: %q", w, root)
		}
	}
	if strings.Contains(root, "run corral as root") {
		t.Errorf("tells root to run as root: %q", root)
	}
	user := procMountHint(facts{uid: 1000})
	if !strings.Contains(user, "as root with CAP_SYS_ADMIN") || !strings.Contains(user, "procMount: Unmasked") {
		t.Errorf("non-root hint: %q", user)
	}
}

func TestRefusalsAndResources(t *testing.T) {
	for _, e := range []unix.Errno{unix.EPERM, unix.EACCES, unix.ENOSPC, unix.EINVAL, unix.ENOSYS} {
		if !isRefusal(e) || isResource(e) {
			t.Errorf("%v: want a refusal", e)
		}
	}
	for _, e := range []unix.Errno{unix.EAGAIN, unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.E2BIG} {
		if isRefusal(e) || !isResource(e) {
			t.Errorf("%v: want a resource shortage", e)
		}
	}
	// Wrapped, as spawnStage returns them.
	if !isResource(&os.SyscallError{Syscall: "pipe2", Err: unix.EMFILE}) {
		t.Error("a wrapped EMFILE is not seen")
	}
	// As the init's failures come back: rebuilt, errno intact.
	remote := failureOf(&SetupError{Step: "clone", Err: unix.EAGAIN}).setupError()
	if !isResource(remote) || isRefusal(remote) {
		t.Errorf("a remote EAGAIN is not seen as a resource shortage: %v", remote)
	}
	// E2BIG and EMFILE starting the init: 125 with the limit, no fallback.
	for _, e := range []unix.Errno{unix.E2BIG, unix.EMFILE, unix.EAGAIN} {
		err := cloneFailure(&Options{Mode: ModeAuto}, unix.CLONE_NEWPID|unix.CLONE_NEWNS, false, e)
		var u *unavailableError
		if errors.As(err, &u) || !strings.Contains(err.Error(), unix.ErrnoName(e)) {
			t.Errorf("%v starting the init: want a plain 125 naming it, got %T %v", e, err, err)
		}
	}
}

// The init's silence is explained without a dangling colon, and a
// resource error from the init is never a reason to fall back.
func TestExplainInitFailure(t *testing.T) {
	err := explainInitFailure(&Options{Mode: ModeAuto}, nil, 2)
	var u *unavailableError
	if !errors.As(err, &u) {
		t.Fatalf("an init that died before ready: want a fallback-able error, got %T", err)
	}
	if msg := err.Error(); strings.HasSuffix(strings.TrimSpace(msg), ":") || !strings.Contains(msg, "exited with status 2 before it was ready") {
		t.Errorf("message: %q", msg)
	}
	err = explainInitFailure(&Options{Mode: ModeAuto}, failureOf(&SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.ENOMEM}).setupError(), 125)
	if errors.As(err, &u) {
		t.Errorf("ENOMEM from the init must not fall back: %v", err)
	}
	err = explainInitFailure(&Options{Mode: ModePidns}, failureOf(&SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM}).setupError(), 125)
	if !strings.Contains(err.Error(), "overmounted") || !strings.Contains(err.Error(), "--mode subreaper") {
		t.Errorf("explicit pidns, refused proc mount: %q", err)
	}
	if err := explainInitFailure(&Options{Mode: ModeAuto}, failureOf(&SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM}).setupError(), 125); strings.Contains(err.Error(), "--mode subreaper") {
		t.Errorf("auto falls back by itself; no advice to: %q", err)
	}
}

func TestArgsHint(t *testing.T) {
	got := argsHint([]string{"A=" + strings.Repeat("x", 3<<20)}, []string{"/bin/true"})
	for _, w := range []string{"3.0 MiB in 2 strings", "the longest 3.0 MiB", "128 KiB for one string", "RLIMIT_STACK"} {
		if !strings.Contains(got, w) {
			t.Errorf("hint lacks %q: %q", w, got)
		}
	}
}

// The capability check needs no file descriptor: at an exhausted
// RLIMIT_NOFILE root still sees its CAP_SYS_ADMIN (reading
// /proc/self/status would fail with EMFILE and look unprivileged).
func TestHasCapWithoutFreeFileDescriptors(t *testing.T) {
	if os.Geteuid() != 0 || !holdsCap(capability.CAP_SYS_ADMIN) {
		t.Skip("needs root with CAP_SYS_ADMIN")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 3
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	has := holdsCap(capability.CAP_SYS_ADMIN)
	_, openErr := os.Open("/proc/self/status")
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(openErr, syscall.EMFILE) {
		t.Fatalf("the limit did not bite (open: %v): the test proves nothing", openErr)
	}
	if !has {
		t.Error("holdsCap(CAP_SYS_ADMIN) is false at an exhausted fd limit")
	}
}
