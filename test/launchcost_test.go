package test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// maxCorralThreads bounds the OS threads of each corral process of a plain
// run (the host side, and the init in pidns mode). Measured: 9 to 11 —
// the main thread (parked as the starter thread in subreaper mode, the
// runner's fork being done), sysmon, os/signal's mask thread, the
// runtime's template thread, the three spares reaper reserves against a
// full pids.max (reaper/signals.go), and the one or two the scheduler
// made for hand-offs. The bound leaves room for the scheduler's whims on
// a loaded machine and still catches a thread per option paid for
// nothing (a proxy, a timer, a watcher) or a leak.
const maxCorralThreads = 14

// A run without sandbox options pays for nothing it did not ask for,
// seen from outside: the runner has the TIOCSTI filter and no_new_privs
// and nothing more (one seccomp filter on top of what the test itself
// runs under, no Landlock domain), corral's processes have a handful of
// threads, no network socket, no seccomp listener (the socket checker)
// and no child but the next process of the run, and the cgroup tree has a corral-… cgroup only where one is
// writable (as root), none rootless.
func TestPlainRunPaysForNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		mount := cgroupV2(t)
		ready := e.file("ready")
		c := e.start(e.args(nil, e.helper("sleep", "-ready", ready)))
		c.waitFile(ready)
		corral := c.cmd.Process.Pid
		runner := e.markedPID("sleep")

		// The runner: the TIOCSTI filter (Seccomp 2, one filter more than
		// this test has), no_new_privs.
		own, theirs := procStatus(t, os.Getpid()), procStatus(t, runner)
		if theirs["Seccomp"] != "2" || theirs["NoNewPrivs"] != "1" {
			t.Errorf("the runner has Seccomp %q and NoNewPrivs %q, want 2 (the TIOCSTI filter) and 1", theirs["Seccomp"], theirs["NoNewPrivs"])
		}
		ownFilters, _ := strconv.Atoi(own["Seccomp_filters"])
		if got := theirs["Seccomp_filters"]; got != strconv.Itoa(ownFilters+1) {
			t.Errorf("the runner has %s seccomp filters, want %d: the TIOCSTI filter on top of the test's %d", got, ownFilters+1, ownFilters)
		}

		// corral's processes: the host side, and the init in pidns mode;
		// each has only the next process of the run as its child.
		procs := []int{corral}
		if m.pidns() {
			procs = append(procs, initPID(t, corral))
		}
		for i, pid := range procs {
			next := runner
			if i+1 < len(procs) {
				next = procs[i+1]
			}
			if kids := childrenOf(t, pid); !slices.Equal(kids, []int{next}) { // cwd_test.go
				t.Errorf("corral process %d has children %v, want only %d", pid, kids, next)
			}
			tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) > maxCorralThreads {
				t.Errorf("corral process %d has %d threads, want at most %d", pid, len(tasks), maxCorralThreads)
			}
			if inet := inetSockets(t, pid); len(inet) > 0 {
				t.Errorf("corral process %d owns network sockets (a proxy nobody asked for?):\n%s", pid, strings.Join(inet, "\n"))
			}
			if n := seccompListeners(t, pid); n > 0 { // boundary_test.go
				t.Errorf("corral process %d holds %d seccomp listeners: a socket checker nobody asked for", pid, n)
			}
		}

		// The cgroup tree: a corral-PID-… cgroup beneath corral's own,
		// with the runner in it, only where one is writable.
		corralCg, runnerCg := ownCgroup(t, corral), ownCgroup(t, runner)
		prefix := fmt.Sprintf("corral-%d-", corral)
		var made []string
		entries, err := os.ReadDir(filepath.Join(mount, corralCg))
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range entries {
			if ent.IsDir() && strings.HasPrefix(ent.Name(), prefix) {
				made = append(made, ent.Name())
				if !m.rootless {
					cleanupCgroup(t, filepath.Join(mount, corralCg, ent.Name()))
				}
			}
		}
		if m.rootless {
			if len(made) > 0 || runnerCg != corralCg {
				t.Errorf("rootless (no writable cgroup), the run made cgroups %v beneath %s, and the runner is in %s", made, corralCg, runnerCg)
			}
		} else if len(made) != 1 || runnerCg != filepath.Join(corralCg, made[0]) {
			t.Errorf("as root the run made cgroups %v beneath %s, want one with the runner, which is in %s", made, corralCg, runnerCg)
		}

		c.signal(syscall.SIGTERM)
		wantCode(t, c.wait(corralTimeout), 128+int(syscall.SIGTERM))
		e.assertGone()

		// No Landlock domain: the runner may stack as many layers as the
		// helper started directly.
		direct, err := exec.Command(helperBin, "-marker", e.marker, "landlock-free").Output()
		if err != nil {
			t.Fatalf("landlock-free, started directly: %v", err)
		}
		if strings.TrimSpace(string(direct)) == "landlock-free -1" {
			missingFeature(t, "Landlock is not available here, so the absence of a domain cannot be seen")
		}
		res := e.run(e.args(nil, e.helper("landlock-free")))
		wantCode(t, res, 0)
		if res.stdout != string(direct) {
			t.Errorf("the runner reports %q, started directly %q: corral installed a Landlock domain nobody asked for", res.stdout, direct)
		}
		e.assertGone()
	})
}

// procStatus reads /proc/PID/status as name -> value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// inetSockets lists the TCP and UDP sockets pid holds, as lines of its
// network namespace's /proc/PID/net/{tcp,tcp6,udp,udp6}.
func inetSockets(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var found []string
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue // that family is not built in
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if fields := strings.Fields(sc.Text()); len(fields) > 9 && inodes[fields[9]] {
				found = append(found, table+": "+sc.Text())
			}
		}
		f.Close()
	}
	return found
}

// Under a tracer that follows forks (strace -f), the runner is the
// tracer's from its fork, so the ptrace hold's PTRACE_TRACEME would fail
// after a whole fork and exec (two, with the cgroup retry). The starter
// reads that it is traced and forks the runner once, untraced; the run is
// the same.
func TestTracedCorralForksTheRunnerOnce(t *testing.T) {
	calls := straceRun(t, "trace=clone,clone3")
	created := 0
	for _, line := range calls {
		// Processes created: clones without CLONE_THREAD that returned a pid.
		if !strings.HasPrefix(line, "clone") || strings.Contains(line, "CLONE_THREAD") {
			continue
		}
		_, ret, _ := strings.Cut(line, ") = ")
		if fields := strings.Fields(ret); len(fields) > 0 {
			if pid, err := strconv.Atoi(fields[0]); err == nil && pid > 0 {
				created++
			}
		}
	}
	if created != 1 {
		t.Errorf("corral under strace -f created %d processes, want 1 (the runner):\n%s", created, strings.Join(calls, "\n"))
	}
}

// The network policy's Landlock rules in subreaper mode are TCP ports
// alone, but the policy implies IPC isolation (SPEC.md, --isolate-ipc):
// where the kernel has Landlock's scopes (ABI 6), a thread of corral in the
// runner's domain is one the runner could tgkill, so the runner starts from
// the re-executed exec stage; where it has none (the guard in the seccomp
// filter holds corral instead) it is exec'd once from the starter thread,
// without a second Go runtime start before it.
func TestNetNoneStartsNoExecStage(t *testing.T) {
	calls := straceRun(t, "trace=execve", "--net", "none")
	var execs []string
	for _, line := range calls {
		if strings.HasPrefix(line, "execve(") && !strings.Contains(line, "= -1") {
			execs = append(execs, line)
		}
	}
	// corral's own execve (strace starts it), the exec stage's where the
	// scopes ask for it, and the runner's.
	helpers, stages := 0, 0
	for _, line := range execs {
		if strings.HasPrefix(line, "execve(\""+helperBin+"\"") {
			helpers++
		}
		if strings.Contains(line, "corral [exec]") {
			stages++
		}
	}
	wantStages := 0
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 && abi >= 6 {
		wantStages = 1
	}
	if len(execs) != 2+wantStages || helpers != 1 || stages != wantStages {
		t.Errorf("under --net none, want corral's execve, %d of the exec stage and the runner's, got:\n%s", wantStages, strings.Join(execs, "\n"))
	}
}

// straceRun runs corral (subreaper mode, as root) under strace -ff with
// the given filter, a runner that exits 7, and the options opts, and
// returns every line strace wrote for every thread and process.
func straceRun(t *testing.T, filter string, opts ...string) []string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		missingFeature(t, "strace is not installed (.ci/run installs it)")
	}
	e := newEnv(t, modes[0])
	dir := t.TempDir()
	cmd := e.command(e.args(opts, e.helper("exit", "-code", "7")))
	cmd.Args = append([]string{strace, "-ff", "-qq", "-e", filter, "-o", filepath.Join(dir, "trace"), corralBin}, cmd.Args[1:]...)
	cmd.Path = strace
	res := e.startCmd(cmd).wait(corralTimeout)
	wantCode(t, res, 7)
	e.assertGone()
	files, _ := filepath.Glob(filepath.Join(dir, "trace.*"))
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if line != "" {
				lines = append(lines, line)
			}
		}
	}
	return lines
}
