package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func sleepBriefly() { time.Sleep(10 * time.Millisecond) }

func startSleeper(t *testing.T) (*exec.Cmd, Stat) {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, st
}

func TestSignalReachesTheSameProcess(t *testing.T) {
	cmd, st := startSleeper(t)
	if err := Signal(st.PID, st.StartTime, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("sleeper ended with %v, want SIGTERM", err)
	}
}

// A different start time means the pid now names another process: the
// signal must be dropped, silently.
func TestSignalSkipsReusedPid(t *testing.T) {
	cmd, st := startSleeper(t)
	if err := Signal(st.PID, st.StartTime+1, syscall.SIGKILL); err != nil {
		t.Fatalf("Signal with stale identity: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if now, err := ReadStat(cmd.Process.Pid); err != nil || now.Zombie() {
		t.Fatalf("process with a different identity was signalled: %+v %v", now, err)
	}
}

func TestSignalIgnoresVanishedProcess(t *testing.T) {
	cmd, st := startSleeper(t)
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // reaped: the pid is free
	if err := Signal(st.PID, st.StartTime, syscall.SIGTERM); err != nil {
		t.Fatalf("Signal to a reaped process: %v", err)
	}
	if err := signalByCheck(st.PID, st.StartTime, syscall.SIGTERM); err != nil {
		t.Fatalf("signalByCheck to a reaped process: %v", err)
	}
}
