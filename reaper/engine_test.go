package reaper

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// These tests run the engine in the test process itself, as a library user
// would: the test binary becomes a child subreaper and the engine owns
// wait4 for it. They must not run in parallel with each other.

func shell(script string) func() (int, error) {
	return func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{
			Env: os.Environ(), Files: []uintptr{0, 1, 2},
		})
	}
}

// lastState is a StateWriter that keeps the last document.
type lastState struct {
	doc    Document
	writes int
}

func (l *lastState) Write(doc Document) error {
	l.doc = doc
	l.writes++
	return nil
}

func runEngine(t *testing.T, cfg Config) (Result, Document) {
	t.Helper()
	w := &lastState{}
	cfg.State = w
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	done := make(chan struct{})
	var res Result
	var err error
	go func() { res, err = Run(cfg); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not finish within 30s")
	}
	if err != nil {
		t.Fatal(err)
	}
	if w.writes == 0 {
		t.Fatal("the engine wrote no state")
	}
	return res, w.doc
}

func TestEngineRunnerExitStatus(t *testing.T) {
	res, doc := runEngine(t, Config{Start: shell("exit 7"), Grace: time.Second})
	if res.ExitCode != 7 || doc.Phase != "exited" || doc.ReapedChildrenTotal != 1 || doc.Escalated || *doc.RunnerExitCode != 7 {
		t.Fatalf("res %+v doc %+v", res, doc)
	}
}

func TestEngineKillsDetachedHelperThatIgnoresTerm(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	script := `setsid sh -c 'trap "" TERM; echo $$ > ` + pidFile + `; while :; do sleep 1; done' & while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done`
	res, doc := runEngine(t, Config{Start: shell(script), Grace: 50 * time.Millisecond})
	if res.ExitCode != 0 || !res.Escalated || !doc.Escalated || doc.OrphanedChildrenTotal < 1 || doc.ReapedOrphansTotal < 1 || doc.ActiveChildren != 0 {
		t.Fatalf("res %+v doc %+v", res, doc)
	}
	data, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 {
		t.Fatalf("helper pid file %q", data)
	}
	if _, err := proc.ReadStat(pid); err == nil {
		t.Fatalf("helper %d survived the teardown", pid)
	}
}

func TestEngineCancelWithSecondSignalSkipsGrace(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	script := `trap "" TERM INT; touch ` + ready + `; while :; do sleep 1; done`
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
		time.Sleep(50 * time.Millisecond)
		_ = unix.Kill(os.Getpid(), unix.SIGINT)
	}()
	res, doc := runEngine(t, Config{Start: shell(script), Grace: 30 * time.Second})
	if res.ExitCode != 137 || res.TerminationSignal != unix.SIGTERM || !res.Escalated {
		t.Fatalf("res %+v", res)
	}
	if doc.TerminationSignal == nil || *doc.TerminationSignal != 15 {
		t.Fatalf("termination_signal = %v, want 15 (the first)", doc.TerminationSignal)
	}
}

func TestEngineForwardsUSR1ToRunner(t *testing.T) {
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := `trap 'echo usr1 > ` + got + `; exit 3' USR1; touch ` + ready + `; while :; do sleep 0.01; done`
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = unix.Kill(os.Getpid(), unix.SIGUSR1)
	}()
	res, _ := runEngine(t, Config{Start: shell(script), Grace: time.Second})
	if res.ExitCode != 3 || res.TerminationSignal != 0 {
		t.Fatalf("res %+v, want exit 3 from the runner's USR1 trap", res)
	}
	if data, _ := os.ReadFile(got); string(data) != "usr1\n" {
		t.Fatalf("runner wrote %q", data)
	}
}

// A cancel that arrives before the runner exists: the runner is never
// started, and the engine ends with 128+S.
func TestEngineCancelBeforeStartNeverStartsRunner(t *testing.T) {
	sigs := CatchSignals()
	defer sigs.Stop()
	sigs.Wait()
	_ = unix.Kill(os.Getpid(), unix.SIGINT)
	deadline := time.Now().Add(5 * time.Second)
	for len(sigs.incoming) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	started := false
	res, doc := runEngine(t, Config{Signals: sigs, Grace: time.Second, Start: func() (int, error) {
		started = true
		return shell("exit 0")()
	}})
	if started {
		t.Fatal("the runner was started after a cancel")
	}
	if res.ExitCode != 130 || res.TerminationSignal != unix.SIGINT {
		t.Fatalf("res %+v, want exit 130 after SIGINT", res)
	}
	if doc.Phase != "exited" || doc.TerminationSignal == nil || *doc.TerminationSignal != 2 || doc.RunnerExitCode == nil || *doc.RunnerExitCode != 130 {
		t.Fatalf("state %+v", doc)
	}
}

// Processes that join the tree during the grace get the teardown signal
// too: here a TERM trap starts a helper, which exits on SIGTERM, so the
// run ends well before the grace without SIGKILL.
func TestEngineSignalsProcessesForkedDuringGrace(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	script := `setsid sh -c 'trap "sleep 1000 & sleep 1000 & wait; exit 0" TERM; touch ` + ready + `; while :; do sleep 0.01; done' & while [ ! -e ` + ready + ` ]; do sleep 0.01; done`
	start := time.Now()
	res, doc := runEngine(t, Config{Start: shell(script), Grace: 20 * time.Second})
	if res.ExitCode != 0 || res.Escalated || doc.Escalated {
		t.Fatalf("res %+v doc %+v: want no escalation", res, doc)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("took %v: the helpers the trap started never got SIGTERM", took)
	}
}

// During the grace, -v says in one line how many processes that joined the
// tree got the teardown signal, not one line per rescan: a runner that
// ignores SIGTERM and forks a sleep every 10 ms.
func TestEngineSaysJoinedOnceForTheGrace(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	script := `trap "" TERM; touch ` + ready + `; while :; do sleep 0.01; done`
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}()
	var lines []string
	logf := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	res, _ := runEngine(t, Config{Start: shell(script), Grace: 500 * time.Millisecond, Logf: logf})
	if res.ExitCode != 137 || !res.Escalated {
		t.Fatalf("res %+v", res)
	}
	var joined []string
	grace := -1
	for i, l := range lines {
		if strings.Contains(l, "joined the tree") {
			joined = append(joined, l)
		}
		if strings.HasPrefix(l, "grace over") {
			grace = i
		}
	}
	if len(joined) != 1 || !strings.Contains(joined[0], "SIGTERM to ") || !strings.Contains(joined[0], "during the grace") {
		t.Fatalf("want one summary line of the processes that joined, got %q", lines)
	}
	if grace < 0 || !strings.Contains(lines[grace-1], "joined the tree") {
		t.Errorf("the summary does not come right before the escalation: %q", lines)
	}
}

// KillAll, when set, is the SIGKILL round's first step; the walk after it
// finds what it did not reach.
func TestEngineKillAllHook(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	script := `setsid sh -c 'trap "" TERM; echo $$ > ` + pidFile + `; while :; do sleep 1; done' & while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done`
	calls := 0
	res, doc := runEngine(t, Config{Start: shell(script), Grace: 50 * time.Millisecond, KillAll: func() error {
		calls++
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return unix.Kill(pid, unix.SIGKILL) // the helper is our child now: its pid is exact
	}})
	if calls == 0 {
		t.Fatal("KillAll was never called")
	}
	if res.ExitCode != 0 || !res.Escalated || !doc.Escalated || doc.ActiveChildren != 0 {
		t.Fatalf("res %+v doc %+v", res, doc)
	}
}

// A KillAll that finds no group (ErrNoMembers) is no kill: the first
// SIGKILL round walks at once. Taken for a kill, the helper survived the
// first round and met its SIGKILL only a round later: the second call
// finds it still asleep, with no SIGKILL pending.
func TestEngineKillAllNoGroupWalks(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	script := `setsid sh -c 'trap "" TERM; echo $$ > ` + pidFile + `; while :; do sleep 1; done' & while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done`
	calls := 0
	var lines []string
	res, _ := runEngine(t, Config{Start: shell(script), Grace: 50 * time.Millisecond,
		Logf: func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) },
		KillAll: func() error {
			calls++
			if calls > 1 {
				data, err := os.ReadFile(pidFile)
				if err != nil {
					t.Error(err)
					return ErrNoMembers
				}
				if pid := strings.TrimSpace(string(data)); asleepUnkilled(pid) {
					t.Errorf("SIGKILL round %d: helper %s is still asleep with no SIGKILL pending: the first round did not walk", calls, pid)
				}
			}
			return ErrNoMembers
		}})
	if calls == 0 {
		t.Fatal("KillAll was never called")
	}
	if !res.Escalated {
		t.Fatalf("res %+v", res)
	}
	for _, l := range lines {
		if strings.Contains(l, "one step") {
			t.Errorf("no group is not an error worth a line: %q", l)
		}
	}
}

// asleepUnkilled reports whether the process is sleeping or stopped with
// no SIGKILL pending: one no SIGKILL has reached (a killed one is woken,
// and runs to its exit).
func asleepUnkilled(pid string) bool {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false // gone
	}
	state, killed := "", false
	for _, l := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			state = v
		case "SigPnd", "ShdPnd":
			if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(unix.SIGKILL-1)) != 0 {
				killed = true
			}
		}
	}
	return !killed && (strings.HasPrefix(state, "S") || strings.HasPrefix(state, "T"))
}
