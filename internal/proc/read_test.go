package proc

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// readFile must return the whole file even when it outgrows the buffer.
func TestReadFileGrowsPastItsBuffer(t *testing.T) {
	want, err := os.ReadFile("/proc/self/maps") // several KiB, and stable for this process
	if err != nil {
		t.Fatal(err)
	}
	got, err := readFile("/proc/self/maps", make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:min(len(got), 64)], want[:min(len(want), 64)]) || len(got) < 1024 {
		t.Fatalf("readFile returned %d bytes, os.ReadFile %d", len(got), len(want))
	}
	if _, err := readFile("/proc/0/stat", nil); !os.IsNotExist(err) {
		t.Fatalf("readFile of a missing file: %v, want not-exist", err)
	}
}

// SignalTree reaches grandchildren, wakes stopped ones so they act
// on the signal, and counts only live processes.
func TestSignalTreeReachesTheTree(t *testing.T) {
	// The shell runs two sleeps, stops one, and waits: TERM ends both.
	cmd := exec.Command("/bin/sh", "-c", `sleep 30 & sleep 30 & kill -STOP $!; wait`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shell := cmd.Process.Pid
	t.Cleanup(func() {
		for _, st := range Descendants(System(), shell) {
			_ = Signal(st.PID, st.StartTime, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	var stopped bool
	for !stopped && time.Now().Before(deadline) {
		kids := Descendants(System(), shell)
		for _, st := range kids {
			stopped = stopped || st.Stopped()
		}
		if len(kids) < 2 {
			stopped = false
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !stopped {
		t.Fatal("the shell did not start and stop its sleeps")
	}
	if n, _ := SignalTree(shell, syscall.SIGTERM, nil); n != 2 {
		t.Fatalf("SignalTree found %d live processes, want 2", n)
	}
	for time.Now().Before(deadline) {
		live := 0
		for _, st := range Descendants(System(), shell) {
			if !st.Zombie() {
				live++
			}
		}
		if live == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("sleeps survived SIGTERM (the stopped one needs SIGCONT): %+v", Descendants(System(), shell))
}
