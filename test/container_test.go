package test

// corral as a container entrypoint (docs/containers.md,
// docs/privileges.md, docs/usage.md "Exit status"; issue 11). Docker's
// defaults are rebuilt for real
// around corral as PID 1: a new PID and mount namespace whose /proc has
// runc's masked and read-only paths, Docker's capability set (or none),
// no_new_privs, and the part of moby's seccomp profile that refuses
// namespaces to a process without CAP_SYS_ADMIN (test/helper's
// deny-namespaces).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runc's (and moby's) default masked and read-only paths beneath /proc.
var (
	runcMasked   = []string{"asound", "acpi", "interrupts", "kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug", "scsi"}
	runcReadOnly = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
	// Docker's default capability set.
	dockerCaps = []string{"chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
		"net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap"}
)

// container is one way of rebuilding a container around corral.
type container struct {
	uid        int      // 0 or nobodyUID: who corral runs as inside
	caps       []string // the bounding set; nil: none
	seccomp    bool     // the deny-namespaces filter (moby's profile without CAP_SYS_ADMIN)
	hidepid    bool     // /proc mounted with hidepid=2
	extraMasks []string // masked beyond runc's defaults, as a hardened runtime may
}

// dockerDefault is `docker run` without options, as root or as a user.
func dockerDefault(uid int) container {
	c := container{uid: uid, seccomp: true}
	if uid == 0 {
		c.caps = dockerCaps
	}
	return c
}

// inContainer returns corral with args run as PID 1 of c.
func (e *env) inContainer(c container, args []string) *exec.Cmd {
	procOpts := "nosuid,nodev,noexec"
	if c.hidepid {
		procOpts += ",hidepid=2"
	}
	masked := append(slices.Clone(runcMasked), c.extraMasks...)
	bounding := "-all"
	for _, cp := range c.caps {
		bounding += ",+" + cp
	}
	ids := ""
	if c.uid != 0 {
		ids = fmt.Sprintf("--reuid %d --regid %d --clear-groups", c.uid, c.uid)
	}
	// What runc does to a container's /proc: a proc mount for its PID
	// namespace, /dev/null over masked files, an empty read-only tmpfs
	// over masked directories, read-only binds of parts of proc onto
	// themselves. A path this kernel lacks is skipped, as runc does.
	script := `set -e
mount --make-rprivate /
mount -t proc -o ` + procOpts + ` proc /proc
for p in ` + strings.Join(masked, " ") + `; do
	if [ -d /proc/$p ]; then mount -t tmpfs -o ro,nosuid,nodev,noexec tmpfs /proc/$p
	elif [ -e /proc/$p ]; then mount --bind /dev/null /proc/$p; fi
done
for p in ` + strings.Join(runcReadOnly, " ") + `; do
	if [ -e /proc/$p ]; then mount --bind /proc/$p /proc/$p; mount -o remount,bind,ro,nosuid,nodev,noexec /proc/$p; fi
done
exec setpriv --no-new-privs --inh-caps -all --bounding-set ` + bounding + ` ` + ids + ` -- "$@"`
	argv := []string{"-c", script, "container"}
	if c.seccomp {
		argv = append(argv, helperBin, "-marker", e.marker, "deny-namespaces", "--")
	}
	argv = append(append(argv, corralBin), args...)
	cmd := e.command(argv)
	cmd.Path, cmd.Args[0] = "/bin/sh", "/bin/sh"
	cmd.SysProcAttr.Credential = nil // root until setpriv
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	return cmd
}

func requireContainerTools(t *testing.T) {
	t.Helper()
	requireSetpriv(t)
	for _, tool := range []string{"mount", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			missingFeature(t, tool+" (util-linux) is needed to rebuild a container")
		}
	}
}

// sysctlsNamedOnlyWhereTheyExist fails the test if msg names a sysctl
// this kernel does not have.
func sysctlsNamedOnlyWhereTheyExist(t *testing.T, msg string) {
	t.Helper()
	for _, name := range []string{"kernel.unprivileged_userns_clone", "kernel.apparmor_restrict_unprivileged_userns"} {
		if _, err := os.Stat("/proc/sys/" + strings.ReplaceAll(name, ".", "/")); err != nil && strings.Contains(msg, name) {
			t.Errorf("names %s, which this kernel does not have: %q", name, msg)
		}
	}
}

func uidName(uid int) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprintf("uid-%d", uid)
}

// In a default container (seccomp refuses namespaces), auto runs the
// subreaper mode with corral as PID 1, and every promise holds there.
func TestContainerAutoRunsSubreaperAsPID1(t *testing.T) {
	t.Parallel()
	requireContainerTools(t)
	for _, uid := range []int{0, nobodyUID} {
		t.Run(uidName(uid), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			state := e.file("state.json")
			runner := e.helper("spawn", "-setsid", "-then", "report", "-code", "3", "--", "sleep", "-ignore-term")
			args := append([]string{"-v", "--grace", "0.05", "--poll", "0.01", "--state", state, "--"}, runner...)
			res := e.startCmd(e.inContainer(dockerDefault(uid), args)).wait(corralTimeout)
			wantCode(t, res, 3)
			for _, want := range []string{"mode subreaper: pidns unavailable", "seccomp", "Seccomp: 2", "corral is PID 1"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("-v lacks %q: %q", want, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "use --mode subreaper") {
				t.Errorf("the fallback line advises the mode it already fell back to: %q", res.stderr)
			}
			e.assertGone()
			doc := readState(t, state)
			wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 3, "active_children": 0, "phase": "exited"})
			wantAtLeast(t, doc, map[string]int{"orphaned_children_total": 1, "reaped_orphans_total": 1})
			r := parseReport(t, res.stdout)
			if !pid1IsCorral(r["pid1_cmdline"]) || r["ppid"] != "1" {
				t.Errorf("the runner's parent should be corral as PID 1: ppid %s, PID 1 %q", r["ppid"], r["pid1_cmdline"])
			}
			for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
				if r[set] != "0000000000000000" {
					t.Errorf("runner %s = %s, want none", set, r[set])
				}
			}
			if r["NoNewPrivs"] != "1" {
				t.Errorf("runner NoNewPrivs = %s, want 1", r["NoNewPrivs"])
			}
		})
	}
}

// An explicit --mode pidns there is a 125 that names seccomp, and only
// sysctls the kernel has.
func TestContainerExplicitPidnsNamesSeccomp(t *testing.T) {
	t.Parallel()
	requireContainerTools(t)
	for _, uid := range []int{0, nobodyUID} {
		t.Run(uidName(uid), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			ran := e.file("ran")
			runner := e.helper("exit", "-ready", ran)
			res := e.startCmd(e.inContainer(dockerDefault(uid), append([]string{"--mode", "pidns", "--"}, runner...))).wait(corralTimeout)
			wantCode(t, res, 125)
			if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) != 1 {
				t.Errorf("want one line, got %q", res.stderr)
			}
			for _, want := range []string{"clone(CLONE_NEWUSER", "EPERM", "seccomp filter (Seccomp: 2 in /proc/self/status)", "RuntimeDefault", "--mode subreaper"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, res.stderr)
				}
			}
			sysctlsNamedOnlyWhereTheyExist(t, res.stderr)
			assertNotExist(t, ran)
			e.assertGone()
		})
	}
}

// corral probe there says why: seccomp, and that auto picks subreaper.
func TestContainerProbeSaysWhy(t *testing.T) {
	t.Parallel()
	requireContainerTools(t)
	for _, uid := range []int{0, nobodyUID} {
		t.Run(uidName(uid), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			r, available, detail := parseProbe(t, e.startCmd(e.inContainer(dockerDefault(uid), []string{"probe", "--json"})).wait(corralTimeout))
			if r.UID != uid {
				t.Errorf("probe uid %d, want %d", r.UID, uid)
			}
			for _, name := range []string{"user namespaces", "pid namespaces"} {
				if available[name] {
					t.Errorf("probe says %s work under the filter", name)
				}
				if !strings.Contains(detail[name], "Seccomp: 2") {
					t.Errorf("probe's reason for %s does not name seccomp: %q", name, detail[name])
				}
				sysctlsNamedOnlyWhereTheyExist(t, detail[name])
			}
			if r.AutoMode != "subreaper" || !strings.Contains(r.Reason, "seccomp") {
				t.Errorf("auto_mode %q, reason %q: want subreaper because of seccomp", r.AutoMode, r.Reason)
			}
			// The container set no_new_privs, as allowPrivilegeEscalation:
			// false does.
			if !strings.Contains(detail["seccomp"], "NoNewPrivs: 1") {
				t.Errorf("probe does not say no_new_privs is inherited: %q", detail["seccomp"])
			}
		})
	}
}

// procMounts parses a /proc/self/mountinfo the runner printed, and returns
// the mounts of the runner's own /proc and beneath it (the new proc is the
// last mount at /proc; the caller's, now covered, and what was beneath it
// are left out): per-mount options, filesystem type, and proc options.
type procMount struct{ opts, fstype, super string }

func procMounts(t *testing.T, mountinfo string) map[string]procMount {
	t.Helper()
	type entry struct {
		id, parent string
		mp         string
		m          procMount
	}
	var entries []entry
	byID := map[string]entry{}
	top := ""
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 6 || len(fields) < sep+4 {
			continue
		}
		e := entry{id: fields[0], parent: fields[1], mp: fields[4], m: procMount{opts: fields[5], fstype: fields[sep+1], super: fields[sep+3]}}
		entries = append(entries, e)
		byID[e.id] = e
		if e.mp == "/proc" {
			top = e.id
		}
	}
	if top == "" {
		t.Fatalf("the runner's mountinfo has no /proc: %q", mountinfo)
	}
	out := map[string]procMount{"/proc": byID[top].m}
	for _, e := range entries {
		if !strings.HasPrefix(e.mp, "/proc/") {
			continue
		}
		for p, hops := e, 0; hops < len(entries); p, hops = byID[p.parent], hops+1 {
			if p.parent == top {
				out[e.mp] = e.m
				break
			}
		}
	}
	return out
}

func readOnly(m procMount) bool { return slices.Contains(strings.Split(m.opts, ","), "ro") }

// masked reports whether a path beneath the runner's /proc is hidden: a
// tmpfs over a directory, or anything but proc over a file.
func masked(m procMount, ok bool) bool { return ok && m.fstype != "proc" }

// With CAP_SYS_ADMIN added (`docker run --cap-add SYS_ADMIN`, where moby's
// profile allows namespaces), auto picks pidns as root, and the runner's
// fresh /proc keeps the container's hardening: hidepid=2, /proc/sys
// read-only, the masks, and masks beyond runc's defaults.
func TestContainerWithSysAdminKeepsProcHardening(t *testing.T) {
	t.Parallel()
	requireContainerTools(t)
	e := newEnv(t, modes[0])
	c := container{uid: 0, caps: append(slices.Clone(dockerCaps), "sys_admin"), hidepid: true, extraMasks: []string{"kallsyms", "slabinfo"}}
	runner := []string{"/bin/sh", "-c", "cat /proc/self/mountinfo", e.marker}
	res := e.startCmd(e.inContainer(c, append([]string{"-v", "--mode", "auto", "--"}, runner...))).wait(corralTimeout)
	wantCode(t, res, 0)
	if !strings.Contains(res.stderr, "mode pidns: new PID and mount namespaces") {
		t.Fatalf("auto should pick pidns with CAP_SYS_ADMIN: %q", res.stderr)
	}
	mounts := procMounts(t, res.stdout)
	if !strings.Contains(mounts["/proc"].super, "hidepid=invisible") {
		t.Errorf("the runner's /proc lost hidepid=2: %+v", mounts["/proc"])
	}
	for _, p := range runcReadOnly {
		if _, err := os.Stat("/proc/" + p); err != nil {
			t.Logf("/proc/%s: this kernel has none", p)
			continue
		}
		if m, ok := mounts["/proc/"+p]; !ok || !readOnly(m) {
			t.Errorf("/proc/%s is not read-only for the runner: %+v", p, m)
		}
	}
	checked := 0
	for _, p := range append(slices.Clone(runcMasked), c.extraMasks...) {
		if _, err := os.Stat("/proc/" + p); err != nil {
			t.Logf("/proc/%s: this kernel has none", p)
			continue
		}
		checked++
		if m, ok := mounts["/proc/"+p]; !masked(m, ok) || !readOnly(m) {
			t.Errorf("/proc/%s is not masked for the runner: %+v", p, m)
		}
	}
	if checked == 0 {
		t.Fatal("this kernel has none of the masked paths: the test proves nothing")
	}
	e.assertGone()
}

// Without a container, a uid-0 runner in pidns mode still gets /proc/sys
// and /proc/sysrq-trigger read-only (and runc's masks): it owns those files
// even with no capability. Checked from the runner's mountinfo; nothing
// writes there.
func TestPidnsRootRunnerSeesProcSysReadOnly(t *testing.T) {
	t.Parallel()
	m := modes[1] // pidns-root
	e := newEnv(t, m)
	runner := []string{"/bin/sh", "-c", "cat /proc/self/mountinfo", e.marker}
	res := e.run(e.args(nil, runner))
	wantCode(t, res, 0)
	mounts := procMounts(t, res.stdout)
	for _, p := range runcReadOnly {
		if _, err := os.Stat("/proc/" + p); err != nil {
			t.Logf("/proc/%s: this kernel has none", p)
			continue
		}
		if m, ok := mounts["/proc/"+p]; !ok || !readOnly(m) {
			t.Errorf("/proc/%s is writable for a uid-0 runner: %+v", p, m)
		}
	}
	for _, p := range runcMasked {
		if _, err := os.Stat("/proc/" + p); err != nil {
			continue
		}
		if m, ok := mounts["/proc/"+p]; !masked(m, ok) {
			t.Errorf("/proc/%s is not masked for a uid-0 runner: %+v", p, m)
		}
	}
	e.assertGone()
}

// noCaps runs corral as root with no capability at all, as Kubernetes'
// `runAsUser: 0` with `capabilities: drop: [ALL]` does.
func (e *env) noCaps(args []string) *exec.Cmd {
	cmd := e.command(append([]string{"--bounding-set", "-all", "--inh-caps", "-all", "--", corralBin}, args...))
	cmd.Path, cmd.Args[0] = lookTool("setpriv"), "setpriv"
	return cmd
}

// lookTool is the path of a util-linux tool (requireContainerTools or
// requireSetpriv checked it is there).
func lookTool(name string) string {
	path, err := exec.LookPath(name)
	if err != nil {
		return "/usr/bin/" + name
	}
	return path
}

// uid 0 without CAP_SETFCAP cannot map itself into a user namespace
// (Linux 5.12+): explicit pidns says so, probe says so, auto falls back
// giving that reason and keeps its promises.
func TestRootWithoutCapabilities(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	t.Run("explicit-pidns", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, modes[0])
		ran := e.file("ran")
		// In a pod (by its variable): Kubernetes' words for the fix.
		cmd := e.noCaps(append([]string{"--mode", "pidns", "--"}, e.helper("exit", "-ready", ran)...))
		cmd.Env = append(cmd.Env, "KUBERNETES_SERVICE_HOST=10.0.0.1")
		res := e.startCmd(cmd).wait(corralTimeout)
		wantCode(t, res, 125)
		for _, want := range []string{"uid_map", "EPERM", "uid 0 without CAP_SETFCAP cannot map itself", "capabilities.add: [SETFCAP]"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("stderr lacks %q: %q", want, res.stderr)
			}
		}
		if strings.Contains(res.stderr, "clone(") {
			t.Errorf("blames the clone, not the uid map: %q", res.stderr)
		}
		assertNotExist(t, ran)
		e.assertGone()
	})
	t.Run("probe", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, modes[0])
		r, available, detail := parseProbe(t, e.startCmd(e.noCaps([]string{"probe", "--json"})).wait(corralTimeout))
		if available["user namespaces"] || !strings.HasPrefix(detail["user namespaces"], "available, but uid 0 without CAP_SETFCAP cannot map itself") {
			t.Errorf("user namespaces: %v %q", available["user namespaces"], detail["user namespaces"])
		}
		if r.AutoMode != "subreaper" || !strings.Contains(r.Reason, "CAP_SETFCAP") {
			t.Errorf("auto_mode %q, reason %q: want subreaper because of CAP_SETFCAP", r.AutoMode, r.Reason)
		}
		text := e.startCmd(e.noCaps([]string{"probe"})).wait(corralTimeout)
		wantCode(t, text, 0)
		if !strings.Contains(text.stdout, "available, but uid 0 without CAP_SETFCAP cannot map itself") {
			t.Errorf("text probe lacks the reason: %q", text.stdout)
		}
	})
	t.Run("auto-falls-back", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, modes[0])
		state := e.file("state.json")
		runner := e.helper("spawn", "-setsid", "-then", "report", "--", "sleep", "-ignore-term")
		args := append([]string{"-v", "--grace", "0.05", "--poll", "0.01", "--state", state, "--"}, runner...)
		res := e.startCmd(e.noCaps(args)).wait(corralTimeout)
		wantCode(t, res, 0)
		for _, want := range []string{"mode subreaper: pidns unavailable", "uid_map", "CAP_SETFCAP"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("-v lacks %q: %q", want, res.stderr)
			}
		}
		if strings.Contains(res.stderr, "use --mode subreaper") {
			t.Errorf("the fallback line advises the mode it already fell back to: %q", res.stderr)
		}
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"escalated": true, "runner_exit_code": 0, "active_children": 0})
		wantAtLeast(t, doc, map[string]int{"reaped_orphans_total": 1})
		if r := parseReport(t, res.stdout); r["Uid"] != "0 0 0 0" || r["CapEff"] != "0000000000000000" {
			t.Errorf("runner Uid %q CapEff %q: want uid 0 with nothing", r["Uid"], r["CapEff"])
		}
	})
}

// wantResource checks a 125 that names a resource and did not fall back.
func wantResource(t *testing.T, res result, wants ...string) {
	t.Helper()
	wantCode(t, res, 125)
	for _, want := range wants {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "mode subreaper") {
		t.Errorf("a resource shortage made corral fall back: %q", res.stderr)
	}
}

// closeStrayFDs marks close-on-exec every descriptor above stderr that
// this test process inherited from whoever started `go test` (a shell's
// stray descriptors): corral places its stage socket above every
// descriptor it inherits, so a stray fd 251 would turn a low RLIMIT_NOFILE
// into EBADF rather than EMFILE. The tests' own descriptors are
// close-on-exec already (Go opens everything so); children get theirs as
// ExtraFiles.
var closeStrayFDs = sync.OnceValue(func() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
})

// At any low RLIMIT_NOFILE corral either works, or exits 125 naming EMFILE
// and the limit: never a crash (the Go runtime dies when it cannot create
// its poller), never a fallback to subreaper. Some limit in the range
// fails while pidns is set up ("start the init"), some before (corral's
// own start); root keeps seeing its CAP_SYS_ADMIN throughout (no user
// namespace), since the capability check needs no descriptor.
func TestPidnsSetupEMFILE(t *testing.T) {
	t.Parallel()
	requireMode(t, modes[1])
	if err := closeStrayFDs(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"auto", "pidns"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			inSetup, worked := false, false
			for limit := 4; limit <= 16; limit++ {
				cmd := e.command([]string{fmt.Sprintf("--nofile=%d:%d", limit, limit), corralBin, "-v", "--mode", mode, "--", "/bin/true", e.marker})
				cmd.Path, cmd.Args[0] = lookTool("prlimit"), "prlimit"
				res := e.startCmd(cmd).wait(corralTimeout)
				if strings.Contains(res.stderr, "goroutine") || strings.Contains(res.stderr, "fatal error") {
					t.Fatalf("RLIMIT_NOFILE %d: corral crashed: %v", limit, res)
				}
				if strings.Contains(res.stderr, "mode subreaper") || strings.Contains(res.stderr, "new user") {
					t.Errorf("RLIMIT_NOFILE %d: fell back, or root took a user namespace: %q", limit, res.stderr)
				}
				switch res.code {
				case 0:
					worked = true
				case 125:
					for _, want := range []string{"EMFILE", fmt.Sprintf("RLIMIT_NOFILE %d", limit), "ulimit -n"} {
						if !strings.Contains(res.stderr, want) {
							t.Errorf("RLIMIT_NOFILE %d: stderr lacks %q: %q", limit, want, res.stderr)
						}
					}
					inSetup = inSetup || strings.Contains(res.stderr, "start the init")
				default:
					t.Errorf("RLIMIT_NOFILE %d: %v", limit, res)
				}
			}
			if !inSetup || !worked {
				t.Errorf("between RLIMIT_NOFILE 4 and 16 want a pidns setup that meets EMFILE (%v) and a run that works (%v)", inSetup, worked)
			}
			e.assertGone()
		})
	}
}

// EAGAIN from a full pids cgroup while cloning the init is a 125 naming
// the cgroup's pids.max, never a fallback. The cgroup fills up at the very
// moment corral clones its init (test/helper's pids-full-at-clone): a
// limit set any earlier would race with the Go runtime starting its
// threads, and a Go program that cannot create a thread it wants dies
// (a fatal error, not an error value), which this test is not about.
func TestPidnsSetupEAGAIN(t *testing.T) {
	t.Parallel()
	requireMode(t, modes[1])
	const pidsRoot = "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(pidsRoot, "cgroup.procs")); err != nil {
		missingFeature(t, "no cgroup v1 pids controller at "+pidsRoot)
	}
	for _, mode := range []string{"auto", "pidns"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			cg := filepath.Join(pidsRoot, "corral-test-"+randomHex())
			if err := os.Mkdir(cg, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Empty once corral is gone (the kernel may need a moment).
				deadline := time.Now().Add(goneTimeout)
				for os.Remove(cg) != nil && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			})
			ran := e.file("ran")
			args := append([]string{"-marker", e.marker, "pids-full-at-clone", "-cgroup", cg, "--", corralBin, "-v", "--mode", mode, "--"},
				e.helper("exit", "-ready", ran)...)
			cmd := e.command(args)
			cmd.Path, cmd.Args[0] = helperBin, "helper"
			res := e.startCmd(cmd).wait(corralTimeout)
			wantResource(t, res, "EAGAIN", "pids.max", cg)
			assertNotExist(t, ran)
			e.assertGone()
		})
	}
}

// bigConfig writes a config whose process.env (or process.args) takes
// 3.9 MB: more than one execve accepts at an 8 MiB stack limit.
func (e *env) bigConfig(field string) string {
	var list []string
	if field == "args" {
		list = append(list, e.helper("exit")...)
	} else {
		list = append(list, "PATH="+testPath, e.markerEnv())
	}
	for i := 0; i < 39; i++ {
		list = append(list, fmt.Sprintf("V%d=%s", i, strings.Repeat("x", 100_000)))
	}
	return e.writeConfig("big.json", map[string]any{"ociVersion": "1.3.0", "process": map[string]any{field: list}})
}

// E2BIG: a runner whose arguments and environment are too big for one
// execve is a 126 "runner exec failed" that names the limit, in every mode,
// with no internal stage named, and auto does not fall back for it: pidns
// setup carries the runner's environment in the init's start message, not
// in the init's own execve, so only the runner's exec can meet the limit.
func TestE2BIG(t *testing.T) {
	t.Parallel()
	requireMode(t, modes[1])
	for _, tc := range []struct{ mode, field string }{
		{"auto", "env"}, {"pidns", "env"}, {"subreaper", "env"},
		{"auto", "args"}, {"pidns", "args"}, {"subreaper", "args"},
	} {
		t.Run(tc.mode+"-"+tc.field, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			args := []string{"-v", "--mode", tc.mode, "--state", e.file("state.json"), "--config", e.bigConfig(tc.field)}
			if tc.field == "env" {
				args = append(args, "--", "/bin/true", e.marker)
			}
			res := e.run(args)
			wantCode(t, res, 126)
			for _, want := range []string{"runner exec failed", "E2BIG", "RLIMIT_STACK", "128 KiB for one string"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "exec stage") {
				t.Errorf("stderr names an internal stage: %q", res.stderr)
			}
			if tc.mode == "auto" && !strings.Contains(res.stderr, "mode pidns") {
				t.Errorf("auto did not stay in pidns for a runner too big to exec: %q", res.stderr)
			}
			wantState(t, readState(t, e.file("state.json")), map[string]any{"runner_exit_code": 126, "phase": "exited"})
			e.assertGone()
		})
	}
}

// procMountJail runs corral as root with Docker's capabilities
// (CAP_SETFCAP, not CAP_SYS_ADMIN), in a mount namespace where part of
// /proc is overmounted, no seccomp: the fresh proc mount is refused.
func procMountJail(e *env, args []string, extraEnv ...string) result {
	script := `mount --make-rprivate / && mount -t tmpfs -o ro tmpfs /proc/sys && exec setpriv --inh-caps -all --bounding-set -all,+` +
		strings.Join(dockerCaps, ",+") + ` -- "$@"`
	cmd := e.command(append([]string{"-c", script, "jail", corralBin}, args...), extraEnv...)
	cmd.Path, cmd.Args[0] = "/bin/sh", "/bin/sh"
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
	return e.startCmd(cmd).wait(corralTimeout)
}

// The hint for a refused proc mount fits the caller: root without
// CAP_SYS_ADMIN is told the real fixes, not "run corral as root", in the
// words of the engine it runs under (Kubernetes here, by its variable).
func TestProcMountHintFitsTheCaller(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	e := newEnv(t, modes[0])
	res := procMountJail(e, append([]string{"--mode", "pidns", "--"}, e.helper("exit")...), "KUBERNETES_SERVICE_HOST=10.0.0.1")
	wantCode(t, res, 125)
	for _, want := range []string{"mount proc", "EPERM", "overmounted", "lacks CAP_SYS_ADMIN", "capabilities.add: [SYS_ADMIN]", "procMount: Unmasked"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, res.stderr)
		}
	}
	for _, bad := range []string{"run corral as root", "docker run", "podman run"} {
		if strings.Contains(res.stderr, bad) {
			t.Errorf("stderr says %q: %q", bad, res.stderr)
		}
	}
	e.assertGone()
}

// After auto's fallback from a pidns whose init started and then failed,
// -v says the cgroup line once, from the engine that runs, after the mode
// line (issue 20 point 4).
func TestAutoFallbackSaysCgroupOnce(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	e := newEnv(t, modes[0])
	res := procMountJail(e, append([]string{"-v", "--mode", "auto", "--"}, e.helper("exit", "-code", "3")...))
	wantCode(t, res, 3)
	decided := regexp.MustCompile(`corral: cgroup: (not used|the runner's tree goes into)`)
	if n := len(decided.FindAllString(res.stderr, -1)); n != 1 {
		t.Errorf("-v says what became of the cgroup %d times, want once: %q", n, res.stderr)
	}
	if mode, cg := strings.Index(res.stderr, "mode subreaper: pidns unavailable"), strings.Index(res.stderr, "corral: cgroup:"); mode < 0 || cg < mode {
		t.Errorf("-v does not say the fallback before the cgroup line: %q", res.stderr)
	}
	e.assertGone()
}

// ENOSPC names the namespace limit that is 0, not always
// user.max_user_namespaces.
func TestENOSPCNamesTheLimitThatIsZero(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, sysctl := range []string{"max_pid_namespaces", "max_mnt_namespaces"} {
		t.Run(sysctl, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			j := jail{clone: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS, setup: "echo 0 > /proc/sys/user/" + sysctl}
			res := e.startCmd(e.jailed(j, append([]string{"--mode", "pidns", "--"}, e.helper("exit")...))).wait(corralTimeout)
			wantCode(t, res, 125)
			for _, want := range []string{"ENOSPC", "user." + sysctl + " is 0"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr lacks %q: %q", want, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "max_user_namespaces") {
				t.Errorf("blames user.max_user_namespaces: %q", res.stderr)
			}
			e.assertGone()
		})
	}
}

// --allow-new-privs where no_new_privs was inherited gains nothing, so an
// unprivileged caller's unshrinkable bounding set is no reason to refuse;
// without it the refusal says what to drop, not to use a mode that may be
// unavailable.
func TestAllowNewPrivsWithInheritedNoNewPrivs(t *testing.T) {
	t.Parallel()
	requireSetpriv(t)
	for _, inherited := range []bool{true, false} {
		t.Run(fmt.Sprintf("inherited-%v", inherited), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, modes[0])
			pre := []string{"--reuid", "65534", "--regid", "65534", "--clear-groups"}
			if inherited {
				pre = append(pre, "--no-new-privs")
			}
			cmd := e.command(append(append(pre, "--", corralBin, "--mode", "subreaper", "--allow-new-privs", "--"), e.helper("report")...))
			cmd.Path, cmd.Args[0] = lookTool("setpriv"), "setpriv"
			res := e.startCmd(cmd).wait(corralTimeout)
			if !inherited {
				wantCode(t, res, 125)
				if !strings.Contains(res.stderr, "drop --allow-new-privs") || strings.Contains(res.stderr, "pidns") {
					t.Errorf("the refusal should say to drop --allow-new-privs, and no more: %q", res.stderr)
				}
				return
			}
			wantCode(t, res, 0)
			if r := parseReport(t, res.stdout); r["NoNewPrivs"] != "1" || r["CapEff"] != "0000000000000000" {
				t.Errorf("runner NoNewPrivs %s CapEff %s", r["NoNewPrivs"], r["CapEff"])
			}
			e.assertGone()
		})
	}
}

// -v says what teardown did in words that fit: "1 process", and a grace
// cut short by a second signal is not "grace over".
func TestVerboseTeardownLines(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		t.Run("second-signal", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			state, ready := e.file("state.json"), e.file("ready")
			c := e.start(e.args(append([]string{"-v"}, opts(state, "30")...), e.helper("sleep", "-ignore-term", "-ready", ready)))
			c.waitFile(ready)
			c.signal(syscall.SIGTERM)
			c.waitPhase(state, "terminating")
			c.signal(syscall.SIGINT)
			res := c.wait(15 * time.Second)
			wantCode(t, res, 137)
			for _, want := range []string{"SIGTERM to 1 process,", "second cancelling signal, grace cut short: SIGKILL to 1 process"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("-v lacks %q: %q", want, res.stderr)
				}
			}
			for _, bad := range []string{"grace over", "1 processes"} {
				if strings.Contains(res.stderr, bad) {
					t.Errorf("-v says %q: %q", bad, res.stderr)
				}
			}
			e.assertGone()
		})
		t.Run("grace-over", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, m)
			res := e.run(e.args(append([]string{"-v"}, opts("", "0.05")...), e.helper("spawn", "-setsid", "--", "sleep", "-ignore-term")))
			wantCode(t, res, 0)
			if !strings.Contains(res.stderr, "grace over: SIGKILL to 1 process") || strings.Contains(res.stderr, "1 processes") {
				t.Errorf("-v: %q", res.stderr)
			}
			e.assertGone()
		})
	})
}

// Messages about the caller's own input: "--state --" is a usage error,
// a huge malformed value is not echoed whole, a clamped grace is said
// once under -v (and not without it).
func TestMessagesAboutTheCallersInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0])
	res := e.run([]string{"--state", "--", "/bin/true", e.marker})
	wantCode(t, res, 2)
	if !strings.HasPrefix(res.stderr, "usage: --state needs a value") {
		t.Errorf("--state --: %q", res.stderr)
	}
	assertNotExist(t, e.file("--"))

	huge := strings.Repeat("9", 100_000) + "x"
	for _, args := range [][]string{
		{"--grace", huge, "--", "/bin/true"},
		{"--mode", huge, "--", "/bin/true"},
		{"--rlimit", huge, "--", "/bin/true"},
		{"--cap-add", huge, "--", "/bin/true"},
		{"--" + huge, "--", "/bin/true"},
		{"--", huge},
	} {
		res := e.run(args)
		wantCode(t, res, 2)
		if len(res.stderr) > 600 {
			t.Errorf("%s...: a %d-byte message echoes the value", args[0][:min(len(args[0]), 12)], len(res.stderr))
		}
	}

	res = e.run([]string{"-v", "--mode", "subreaper", "--grace", "45", "--", "/bin/true", e.marker})
	wantCode(t, res, 0)
	if n := strings.Count(res.stderr, `--grace "45" is above the maximum: using 30`); n != 1 {
		t.Errorf("-v should say once that the grace was clamped, said it %d times: %q", n, res.stderr)
	}
	res = e.run([]string{"--mode", "subreaper", "--", "/bin/true", e.marker}, "CORRAL_GRACE_SECONDS=45")
	wantCode(t, res, 0)
	if res.stderr != "" {
		t.Errorf("without -v nothing is said: %q", res.stderr)
	}
	res = e.run([]string{"-v", "--mode", "subreaper", "--", "/bin/true", e.marker}, "CORRAL_GRACE_SECONDS=45")
	if !strings.Contains(res.stderr, `CORRAL_GRACE_SECONDS="45" is above the maximum: using 30`) {
		t.Errorf("-v does not say the environment's grace was clamped: %q", res.stderr)
	}
	e.assertGone()
}
