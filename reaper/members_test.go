package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// fakeMembers stands for the runner's cgroup: it lists the engine's live
// descendants, as cgroup.procs would, plus extra, minus omit; Holds
// refuses the pids of refuse (as the cgroup id check refuses a process
// outside) and answers err when set.
type fakeMembers struct {
	extra   []int
	omit    func(pid int) bool
	refuse  map[int]bool
	err     error
	checked []int // the pids Holds was asked about
	listErr error // List's answer, when set
}

func (f *fakeMembers) List(buf []int) ([]int, error) {
	if f.listErr != nil {
		return buf, f.listErr
	}
	for _, st := range proc.Descendants(proc.System(), os.Getpid()) {
		if !st.Zombie() && (f.omit == nil || !f.omit(st.PID)) {
			buf = append(buf, st.PID)
		}
	}
	return append(buf, f.extra...), nil
}

func (f *fakeMembers) Holds(pidfd int) (bool, error) {
	pid := pidOfPidfd(pidfd)
	f.checked = append(f.checked, pid)
	if f.err != nil {
		return false, f.err
	}
	return !f.refuse[pid], nil
}

func (f *fakeMembers) String() string { return "the fake group" }

// pidOfPidfd reads the pid a pidfd pins from its fdinfo.
func pidOfPidfd(fd int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			return pid
		}
	}
	return -1
}

// cancelWhenReady sends SIGTERM to the engine (this process) once ready
// exists, with the runner still alive: its tree then holds a child of
// the runner's, which is no child of the engine's.
func cancelWhenReady(ready string) {
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}()
}

// runMembers runs a tree of three that ignore SIGTERM (the runner, its
// child, and an orphan handed to the engine) at grace 0 through f,
// cancelled with SIGTERM, and returns the -v lines.
func runMembers(t *testing.T, f *fakeMembers) []string {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cancelWhenReady(ready)
	var lines []string
	logf := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	// SIGTERM ignored: the count of signalled processes and the
	// escalation do not depend on who died of it first.
	// ": >", a builtin: no touch process is still exiting at the cancel.
	script := `trap "" TERM; sleep 1000 & (setsid sleep 1000 &); : > ` + ready + `; wait`
	res, doc := runEngine(t, Config{Start: shell(script), Grace: 0, Members: f, Logf: logf})
	if res.ExitCode != 137 || res.TerminationSignal != unix.SIGTERM || !res.Escalated || doc.ActiveChildren != 0 {
		t.Fatalf("res %+v doc %+v", res, doc)
	}
	return lines
}

// has reports whether a line contains every one of words.
func has(lines []string, words ...string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		for _, w := range words {
			if !strings.Contains(l, w) {
				return false
			}
		}
		return true
	})
}

// At grace 0 the members are signalled without a walk: the engine's own
// children by pid, the runner's child through a pidfd that Holds
// confirmed.
func TestEngineMembersSignalTreeAtGraceZero(t *testing.T) {
	f := &fakeMembers{}
	lines := runMembers(t, f)
	if !has(lines, "teardown: SIGTERM through the fake group") || has(lines, "walking /proc") {
		t.Fatalf("the members were not signalled in one pass: %q", lines)
	}
	if !has(lines, "teardown: SIGTERM to 3 processes, grace 0s") {
		t.Errorf("want 3 processes signalled: %q", lines)
	}
	if len(f.checked) != 1 {
		t.Errorf("Holds was asked about %v; want the runner's child alone (the engine's children are signalled by pid)", f.checked)
	}
}

// A listed pid that Holds refuses — outside the group, as a pid reused by
// another process is — gets no signal; the walk then covers the tree.
func TestEngineMembersRefusedPidIsNotSignalled(t *testing.T) {
	outsider, termFile := startOutsider(t)
	f := &fakeMembers{extra: []int{outsider}, refuse: map[int]bool{outsider: true}}
	lines := runMembers(t, f)
	if !slices.Contains(f.checked, outsider) {
		t.Fatalf("Holds was never asked about pid %d: %v", outsider, f.checked)
	}
	if !has(lines, "1 process not a member", "walking /proc") || !has(lines, "SIGTERM to 3 processes") {
		t.Errorf("want the refusal said and the walk to signal the tree: %q", lines)
	}
	time.Sleep(300 * time.Millisecond) // its trap runs within 50 ms of a SIGTERM
	if data, err := os.ReadFile(termFile); err == nil {
		t.Fatalf("the refused pid %d got SIGTERM (its trap wrote %q)", outsider, data)
	}
	// The control: its trap does write when it gets SIGTERM.
	_ = unix.Kill(outsider, unix.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(termFile); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the outsider's TERM trap never wrote: the check above proves nothing")
		}
	}
}

// startOutsider starts a shell that logs SIGTERM and is no descendant of
// this process (the subreaper bit is cleared while its parent exits, so
// it is handed to another reaper), and kills it when the test ends.
func startOutsider(t *testing.T) (pid int, termFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile, termFile := filepath.Join(dir, "pid"), filepath.Join(dir, "term")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	script := `sh -c 'trap "echo TERM > ` + termFile + `" TERM; echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; while :; do sleep 0.05; done' >/dev/null 2>&1 &`
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if data, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the outsider never wrote its pid")
		}
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); unix.Close(fd) })
	if st, err := proc.ReadStat(pid); err != nil || st.PPID == os.Getpid() {
		t.Fatalf("the outsider %d is this process's child (%+v, %v)", pid, st, err)
	}
	return pid, termFile
}

// Where the kernel cannot say who is a member, the walk does the round.
func TestEngineMembersUnsupportedWalks(t *testing.T) {
	f := &fakeMembers{err: fmt.Errorf("ioctl PIDFD_GET_INFO: %w", errors.ErrUnsupported)}
	lines := runMembers(t, f)
	if !has(lines, "PIDFD_GET_INFO", "walking /proc") || !has(lines, "SIGTERM to 3 processes") {
		t.Fatalf("want the fallback said and the walk to signal the tree: %q", lines)
	}
}

// A run that turned out to have no cgroup (its Members set before that
// was decided) walks, as without Members, and says nothing of it.
func TestEngineMembersNoGroupWalksSilently(t *testing.T) {
	lines := runMembers(t, &fakeMembers{listErr: ErrNoMembers})
	if has(lines, "walking /proc") || has(lines, "through") || !has(lines, "SIGTERM to 3 processes") {
		t.Fatalf("want the walk to signal the tree, with no line about the group: %q", lines)
	}
}

// A child of the engine's that is not a member (the runner moved itself
// out of its cgroup) sends the round to the walk, which finds what it
// forked.
func TestEngineMembersChildOutsideWalks(t *testing.T) {
	runner := 0
	f := &fakeMembers{omit: func(pid int) bool {
		if runner == 0 {
			st, _ := proc.ReadStat(pid)
			if st.PPID == os.Getpid() && st.Comm == "sh" {
				runner = pid
			}
		}
		return pid == runner
	}}
	lines := runMembers(t, f)
	if !has(lines, "outside it", "walking /proc") || !has(lines, "SIGTERM to 3 processes") {
		t.Fatalf("want the outside child said and the walk to signal the tree: %q", lines)
	}
}
