package reaper

import (
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// recordingJobs is a JobControl as the pidns init has it: stops are
// reported and corral itself never stops, so the test process is safe.
type recordingJobs struct {
	mu        sync.Mutex
	stops     []syscall.Signal
	continued int
	stopped   chan struct{} // closed at the first stop
}

func (j *recordingJobs) RunnerStopped(sig syscall.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stops = append(j.stops, sig)
	if len(j.stops) == 1 {
		close(j.stopped)
	}
	return false
}

func (j *recordingJobs) Continued() {
	j.mu.Lock()
	j.continued++
	j.mu.Unlock()
}

// In terminal mode the engine sees the runner stop (WUNTRACED), reports
// it, does not count it as an exit, and continues the runner's whole
// process group at the next SIGCONT: a child of the runner that stopped
// with it must run again, or the runner's wait for it never ends.
func TestEngineJobControlContinuesRunnerGroup(t *testing.T) {
	jobs := &recordingJobs{stopped: make(chan struct{})}
	start := func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 1 & kill -STOP 0; wait $!; exit 3"},
			&syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setpgid: true}})
	}
	go func() {
		select {
		case <-jobs.stopped:
			_ = unix.Kill(os.Getpid(), unix.SIGCONT)
		case <-time.After(20 * time.Second):
		}
	}()
	res, doc := runEngine(t, Config{Start: start, Grace: time.Second, JobControl: jobs})
	if res.ExitCode != 3 || doc.ReapedChildrenTotal < 1 {
		t.Fatalf("res %+v doc %+v, want the runner's exit 3", res, doc)
	}
	jobs.mu.Lock()
	defer jobs.mu.Unlock()
	if len(jobs.stops) != 1 || jobs.stops[0] != unix.SIGSTOP {
		t.Errorf("stops reported: %v, want [SIGSTOP]", jobs.stops)
	}
	if jobs.continued < 1 {
		t.Errorf("Continued was never called")
	}
}
