package sockcheck

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/seccomp"
)

// A worker keeps the pidfd of the thread it last checked a call of
// (pidfdOf). Kept past its thread's end, under a tid a live caller holds
// now, it must never stand for the caller: the descriptor is taken
// through a fresh pidfd of the caller's.
func TestKeptPidfdOfGoneThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A thread that ends, leaving its pidfd behind.
	stale := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		fd, err := seccomp.OpenThreadPidfd(unix.Gettid())
		stale <- fd
		errs <- err
	}()
	pidfd, err := <-stale, <-errs
	if errors.Is(err, unix.EINVAL) {
		t.Skip("no PIDFD_THREAD (Linux 6.9): no pidfd is kept")
	}
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := seccomp.GetFD(pidfd, p[0])
		if errors.Is(err, unix.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended thread's pidfd still answers: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	w := &workerState{pidfd: pidfd, pidfdTid: unix.Gettid()} // as if this tid had been the ended thread's
	defer w.dropPidfd()
	got, fresh, err := w.getFD(unix.Gettid(), pidfd, true, p[0])
	if err != nil {
		t.Fatalf("the caller's descriptor through a kept pidfd of a gone thread: %v", err)
	}
	defer unix.Close(got)
	var a, b unix.Stat_t
	if unix.Fstat(got, &a) != nil || unix.Fstat(p[0], &b) != nil || a.Ino != b.Ino {
		t.Fatalf("the descriptor taken is not the caller's (inode %d, want %d)", a.Ino, b.Ino)
	}
	// The one kept now is the caller's (the gone thread's was closed:
	// its number may have come back).
	if w.pidfd != fresh {
		t.Errorf("getFD took the descriptor through pidfd %d and keeps %d", fresh, w.pidfd)
	} else if again, err := seccomp.GetFD(w.pidfd, p[0]); err != nil {
		t.Errorf("the pidfd kept now does not reach the caller: %v", err)
	} else {
		unix.Close(again)
	}
}
