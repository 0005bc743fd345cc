package explain

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/container"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS

func TestRefusalHintFromWhatCorralSees(t *testing.T) {
	allCaps := ^uint64(0)
	for _, tc := range []struct {
		name   string
		f      Facts
		step   string
		err    error
		flags  uintptr
		userns bool
		want   []string
		not    []string
	}{
		{
			name: "seccomp filter, no sysctl on this kernel",
			f:    Facts{UID: 1000, Seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"Seccomp: 2", "RuntimeDefault", "seccomp=unconfined"},
			not:  []string{"unprivileged_userns_clone", "apparmor", "subreaper"},
		},
		{
			name: "the Debian sysctl, where it exists and forbids",
			f:    Facts{UID: 1000, Seccomp: "0", sysctls: map[string]string{"kernel.unprivileged_userns_clone": "0", "kernel.apparmor_restrict_unprivileged_userns": "0"}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"kernel.unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1"},
			not:  []string{"seccomp", "apparmor"},
		},
		{
			name: "AppArmor's restriction",
			f:    Facts{UID: 1000, Seccomp: "0", sysctls: map[string]string{"kernel.apparmor_restrict_unprivileged_userns": "1"}},
			step: "clone(CLONE_NEWUSER)", err: unix.EACCES, flags: nsFlags, userns: true,
			want: []string{"kernel.apparmor_restrict_unprivileged_userns is 1"},
			not:  []string{"unprivileged_userns_clone is"},
		},
		{
			name: "nothing visible",
			f:    Facts{UID: 1000, Seccomp: "0", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"none of the usual causes is visible"},
		},
		{
			name: "uid 0 without CAP_SETFCAP",
			f:    Facts{UID: 0, sysctls: map[string]string{}},
			step: `map uid 0 to itself (write "0 0 1" to /proc/PID/uid_map)`, err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"uid 0 without CAP_SETFCAP cannot map itself", "Linux 5.12", "SETFCAP", "runAsUser"},
		},
		{
			name: "uid 0 with CAP_SETFCAP: something else refused the map",
			f:    Facts{UID: 0, caps: 1 << uint(capability.CAP_SETFCAP), sysctls: map[string]string{}},
			step: `map uid 0 to itself (write "0 0 1" to /proc/PID/uid_map)`, err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"refused to map uid 0"},
			not:  []string{"without CAP_SETFCAP"},
		},
		{
			name: "ENOSPC names the count that is 0",
			f:    Facts{UID: 1000, sysctls: map[string]string{"user.max_user_namespaces": "63000", "user.max_pid_namespaces": "0", "user.max_mnt_namespaces": "63000"}},
			step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", err: unix.ENOSPC, flags: nsFlags, userns: true,
			want: []string{"user.max_pid_namespaces is 0"},
			not:  []string{"max_user_namespaces is", "max_mnt"},
		},
		{
			name: "ENOSPC with nothing at 0: the counts and the nesting depth",
			f:    Facts{UID: 1000, sysctls: map[string]string{"user.max_user_namespaces": "5", "user.max_pid_namespaces": "5", "user.max_mnt_namespaces": "5", "user.max_net_namespaces": "0"}},
			step: "clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS)", err: unix.ENOSPC, flags: nsFlags, userns: true,
			want: []string{"user.max_user_namespaces=5", "32 deep"},
			not:  []string{"max_net"}, // not asked for: no --net none
		},
		{
			name: "root with CAP_SYS_ADMIN under a custom filter",
			f:    Facts{UID: 0, caps: allCaps, Seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWPID|CLONE_NEWNS)", err: unix.EPERM, flags: unix.CLONE_NEWPID | unix.CLONE_NEWNS,
			want: []string{"Seccomp: 2"},
			not:  []string{"RuntimeDefault", "without CAP_SYS_ADMIN"},
		},
		{
			name: "root without CAP_SYS_ADMIN is told how to need no user namespace",
			f:    Facts{UID: 0, caps: 1 << uint(capability.CAP_SETFCAP), Seccomp: "2", sysctls: map[string]string{}},
			step: "clone(CLONE_NEWUSER)", err: unix.EPERM, flags: nsFlags, userns: true,
			want: []string{"--cap-add SYS_ADMIN", "RuntimeDefault"},
		},
		{
			name: "a read-only /proc is the cause, not refused user namespaces",
			f:    Facts{UID: 65534, Seccomp: "0", sysctls: map[string]string{}},
			step: `map uid 65534 to itself (write "65534 65534 1" to /proc/PID/uid_map)`, err: unix.EROFS, flags: unix.CLONE_NEWUSER, userns: true,
			want: []string{"/proc is read-only", "--proc /proc after --ro-bind / /"},
			not:  []string{"are refused", "security module"},
		},
		{
			name: "a /proc unfit for id maps gives its own fix",
			f:    Facts{UID: 65534, sysctls: map[string]string{}},
			step: IDMapsStep, err: &unfitProc{"/proc belongs to another PID namespace", "mount a /proc of corral's own PID namespace (--mount-proc)"}, flags: nsFlags, userns: true,
			want: []string{"--mount-proc"},
			not:  []string{"are refused"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RefusalHint(tc.f, tc.step, tc.err, tc.flags, tc.userns)
			// Every hint is a whole sentence (issue 20 point 2 ended in "may").
			if strings.HasSuffix(got, " may") || strings.HasSuffix(got, ":") {
				t.Errorf("hint stops mid-sentence: %q", got)
			}
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
	root := procMountHint(Facts{UID: 0, caps: 1 << uint(capability.CAP_SETFCAP)})
	for _, w := range []string{"lacks CAP_SYS_ADMIN", "--cap-add SYS_ADMIN", "systempaths=unconfined", "procMount: Unmasked"} {
		if !strings.Contains(root, w) {
			t.Errorf("uid 0 hint lacks %q: %q", w, root)
		}
	}
	if strings.Contains(root, "run corral as root") {
		t.Errorf("tells root to run as root: %q", root)
	}
	// Inside podman, podman's words alone (issue 20 point 5).
	podman := procMountHint(Facts{UID: 0, engine: container.Podman})
	for _, w := range []string{"podman run --cap-add SYS_ADMIN", "podman run --security-opt unmask=ALL"} {
		if !strings.Contains(podman, w) {
			t.Errorf("podman hint lacks %q: %q", w, podman)
		}
	}
	if strings.Contains(podman, "docker") || strings.Contains(podman, "systempaths") {
		t.Errorf("podman hint speaks Docker: %q", podman)
	}
	user := procMountHint(Facts{UID: 1000})
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
	// Wrapped, as stage.Spawn returns them.
	if !isResource(&os.SyscallError{Syscall: "pipe2", Err: unix.EMFILE}) {
		t.Error("a wrapped EMFILE is not seen")
	}
	// As the init's failures come back: rebuilt, errno intact.
	remote := stage.FailureOf(&setuperr.SetupError{Step: "clone", Err: unix.EAGAIN}).SetupError()
	if !isResource(remote) || isRefusal(remote) {
		t.Errorf("a remote EAGAIN is not seen as a resource shortage: %v", remote)
	}
	// E2BIG and EMFILE starting the init: 125 with the limit, no fallback.
	for _, e := range []unix.Errno{unix.E2BIG, unix.EMFILE, unix.EAGAIN} {
		err := CloneFailure(&plan.Plan{Mode: plan.ModeAuto}, stage.Caller{}, unix.CLONE_NEWPID|unix.CLONE_NEWNS, false, e)
		var u *UnavailableError
		if errors.As(err, &u) || !strings.Contains(err.Error(), unix.ErrnoName(e)) {
			t.Errorf("%v starting the init: want a plain 125 naming it, got %T %v", e, err, err)
		}
	}
}

// The init's silence is explained without a dangling colon, and a
// resource error from the init is never a reason to fall back.
func TestExplainInitFailure(t *testing.T) {
	err := ExplainInitFailure(&plan.Plan{Mode: plan.ModeAuto}, stage.Caller{}, nil, 2)
	var u *UnavailableError
	if !errors.As(err, &u) {
		t.Fatalf("an init that died before ready: want a fallback-able error, got %T", err)
	}
	if msg := err.Error(); strings.HasSuffix(strings.TrimSpace(msg), ":") || !strings.Contains(msg, "exited with status 2 before it was ready") {
		t.Errorf("message: %q", msg)
	}
	err = ExplainInitFailure(&plan.Plan{Mode: plan.ModeAuto}, stage.Caller{}, stage.FailureOf(&setuperr.SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.ENOMEM}).SetupError(), 125)
	if errors.As(err, &u) {
		t.Errorf("ENOMEM from the init must not fall back: %v", err)
	}
	err = ExplainInitFailure(&plan.Plan{Mode: plan.ModePidns}, stage.Caller{}, stage.FailureOf(&setuperr.SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM}).SetupError(), 125)
	if !strings.Contains(err.Error(), "overmounted") || !strings.Contains(err.Error(), "--mode subreaper") {
		t.Errorf("explicit pidns, refused proc mount: %q", err)
	}
	if err := ExplainInitFailure(&plan.Plan{Mode: plan.ModeAuto}, stage.Caller{}, stage.FailureOf(&setuperr.SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM}).SetupError(), 125); strings.Contains(err.Error(), "--mode subreaper") {
		t.Errorf("auto falls back by itself; no advice to: %q", err)
	}
}

// The host hands the init's failure on as it came, errno and hint; a
// failed init without a word says how it ended.
func TestInitFailure(t *testing.T) {
	overmounted := &setuperr.SetupError{Step: "mount proc on /proc in the new namespace", Err: unix.EPERM, Hint: "parts of /proc are overmounted"}
	remote := stage.FailureOf(overmounted).SetupError()
	if got := InitFailure(remote, 125); !errors.Is(got, unix.EPERM) || got.Hint != overmounted.Hint {
		t.Errorf("InitFailure lost the errno or the hint: %v", got)
	}
	if got := InitFailure(nil, 2); !strings.Contains(got.Error(), "status 2 before it was ready") {
		t.Errorf("InitFailure(nil, 2) = %v", got)
	}
}

// The /proc this test runs under is its own PID namespace's and writable
// (the integration tests make the other kinds: test/engine_test.go's
// TestProbeNamesAnUnusableProc); a directory that is not a proc mount is
// unfit, and says how to mount one.
func TestProcForIDMaps(t *testing.T) {
	if err := procForIDMaps("/proc"); err != nil {
		t.Fatalf("this test's own /proc: %v", err)
	}
	if err := CheckProc(&plan.Plan{Mode: plan.ModeAuto}); err != nil {
		t.Fatalf("CheckProc: %v", err)
	}
	var unfit *unfitProc
	if err := procForIDMaps(t.TempDir()); !errors.As(err, &unfit) || !strings.Contains(unfit.fix, "mount -t proc") {
		t.Errorf("a directory that is not a proc mount: %v", err)
	}
}
