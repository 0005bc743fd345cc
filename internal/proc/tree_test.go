package proc

import (
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

func pids(stats []Stat) []int {
	out := make([]int, 0, len(stats))
	for _, s := range stats {
		out = append(out, s.PID)
	}
	slices.Sort(out)
	return out
}

// The Python supervisor's test tree: 10 → 11 → 12 (a zombie), and an unrelated 20.
func TestDescendantsSeedTree(t *testing.T) {
	table := Table{
		10: {PID: 10, PPID: 1, StartTime: 1, State: 'S'},
		11: {PID: 11, PPID: 10, StartTime: 2, State: 'S'},
		12: {PID: 12, PPID: 11, StartTime: 3, State: 'Z'},
		20: {PID: 20, PPID: 1, StartTime: 4, State: 'S'},
	}
	if got := pids(Descendants(table, 10)); !slices.Equal(got, []int{11, 12}) {
		t.Fatalf("Descendants(10) = %v, want [11 12]", got)
	}
	if got := pids(Descendants(table, 20)); len(got) != 0 {
		t.Fatalf("Descendants(20) = %v, want none", got)
	}
	if got := pids(Descendants(table, 1)); !slices.Equal(got, []int{10, 11, 12, 20}) {
		t.Fatalf("Descendants(1) = %v", got)
	}
}

// staleSource lists a child under a parent its stat no longer names: a
// pid reused (or reparented) between the children read and the stat read.
type staleSource struct{ Table }

func (s staleSource) Children(pid int) ([]int, error) {
	if pid == 10 {
		return []int{11, 30}, nil
	}
	return s.Table.Children(pid)
}

func TestDescendantsSkipsReusedAndVanished(t *testing.T) {
	src := staleSource{Table{
		11: {PID: 11, PPID: 10},
		30: {PID: 30, PPID: 999}, // pid 30 now belongs to someone else's child
		31: {PID: 31, PPID: 30},
	}}
	// 30 and its children must not be walked; 40 (listed nowhere) is never read.
	if got := pids(Descendants(src, 10)); !slices.Equal(got, []int{11}) {
		t.Fatalf("Descendants = %v, want [11]", got)
	}
}

func TestDescendantsCycleSafe(t *testing.T) {
	// A corrupt snapshot must not loop forever.
	table := Table{1: {PID: 1, PPID: 2}, 2: {PID: 2, PPID: 1}}
	if got := pids(Descendants(table, 1)); !slices.Equal(got, []int{2}) {
		t.Fatalf("Descendants = %v", got)
	}
}

// The live source must see a real grandchild, the same as a full scan.
func TestLiveDescendantsMatchFullScan(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, st := range Descendants(System(), cmd.Process.Pid) {
			_ = Signal(st.PID, st.StartTime, 9)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var live []int
	for range 200 { // the shell needs a moment to fork its two sleeps
		live = pids(Descendants(System(), cmd.Process.Pid))
		if len(live) == 2 {
			break
		}
		sleepBriefly()
	}
	if len(live) != 2 {
		t.Fatalf("live walk found %v, want two sleeps", live)
	}
	table, err := ScanAll()
	if err != nil {
		t.Fatal(err)
	}
	if scanned := pids(Descendants(table, cmd.Process.Pid)); !slices.Equal(live, scanned) {
		t.Fatalf("live walk %v != full scan %v", live, scanned)
	}
	kids, err := ChildrenOf(cmd.Process.Pid)
	if err != nil || len(kids) != 2 {
		t.Fatalf("ChildrenOf = %v, %v", kids, err)
	}
	self, err := ChildrenOf(os.Getpid())
	if err != nil || !slices.ContainsFunc(self, func(s Stat) bool { return s.PID == cmd.Process.Pid }) {
		t.Fatalf("ChildrenOf(self) = %v, %v: want the shell", self, err)
	}
}

// A children file held open lists the children as they are at each read,
// and keeps working when no descriptor can be opened any more. Orphans are
// handed to the subreaper's leader thread, whichever thread the test runs on.
func TestChildrenFileRereads(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	leader, err := OpenChildrenFile(os.Getpid(), os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	pidFile := filepath.Join(t.TempDir(), "pid")
	orphan := func() int {
		// Not os/exec: its Wait would also wait for the orphan.
		sh, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 30 & echo $! >" + pidFile}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(sh, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		out, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		})
		return pid
	}
	a := orphan()
	kids, err := leader.Read()
	if err != nil || !slices.Contains(kids, a) {
		t.Fatalf("after the first orphan: %v %v, want %d listed", kids, err, a)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	b := orphan()
	low := unix.Rlimit{Cur: 3, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	kids, err = leader.Read()
	_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	if err != nil || !slices.Contains(kids, a) || !slices.Contains(kids, b) {
		t.Fatalf("with RLIMIT_NOFILE 3: %v %v, want %d and %d listed", kids, err, a, b)
	}
}
