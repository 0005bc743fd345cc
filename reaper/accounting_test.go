package reaper

import (
	"maps"
	"testing"

	"github.com/corral-sh/corral/internal/proc"
	"golang.org/x/sys/unix"
)

// The bounded-memory test of the Python supervisor corral replaces: identities are kept only for children
// that exist now, an orphan is counted once however often it is seen, and
// an unknown pid reaped before any scan saw it still counts as adopted.
func TestAccountingIdentityMemoryIsBounded(t *testing.T) {
	a := newAccounting(11)
	runner := proc.Stat{PID: 11, PPID: 10, StartTime: 1, State: 'S'}
	orphan := proc.Stat{PID: 12, PPID: 10, StartTime: 2, State: 'Z'}

	a.observe([]proc.Stat{runner, orphan})
	a.observe([]proc.Stat{runner, orphan})
	if a.orphanedTotal != 1 {
		t.Fatalf("orphanedTotal = %d after seeing one orphan twice, want 1", a.orphanedTotal)
	}
	if want := map[int]child{12: {start: 2}}; !maps.Equal(a.adopted, want) {
		t.Fatalf("adopted = %v, want %v", a.adopted, want)
	}
	a.observe([]proc.Stat{runner})
	if len(a.adopted) != 0 {
		t.Fatalf("adopted = %v after the orphan left, want empty", a.adopted)
	}

	a.reaped(99, 0)
	if a.orphanedTotal != 2 || a.reapedOrphans != 1 || a.reapedTotal != 1 || len(a.adopted) != 0 {
		t.Fatalf("after reaping unknown 99: orphaned %d reapedOrphans %d reaped %d adopted %v",
			a.orphanedTotal, a.reapedOrphans, a.reapedTotal, a.adopted)
	}
}

func TestAccountingPidReuseIsANewOrphan(t *testing.T) {
	a := newAccounting(11)
	a.observe([]proc.Stat{{PID: 12, PPID: 10, StartTime: 2, State: 'S'}})
	a.observe([]proc.Stat{{PID: 12, PPID: 10, StartTime: 7, State: 'S'}})
	if a.orphanedTotal != 2 {
		t.Fatalf("orphanedTotal = %d, want 2: same pid, new start time", a.orphanedTotal)
	}
}

func TestAccountingCounts(t *testing.T) {
	a := newAccounting(11)
	a.observe([]proc.Stat{
		{PID: 11, StartTime: 1, State: 'S'},
		{PID: 12, StartTime: 2, State: 'S'},
		{PID: 13, StartTime: 3, State: 'Z'}, // exited, not yet reaped: not live
	})
	if a.liveChildren != 2 || a.liveAdopted != 1 || a.orphanedTotal != 2 {
		t.Fatalf("live %d adopted %d orphaned %d, want 2 1 2", a.liveChildren, a.liveAdopted, a.orphanedTotal)
	}
	a.reaped(13, 0)
	a.reaped(12, 0)
	a.reaped(11, 7)
	if !a.runnerReaped || a.runnerExitCode != 7 || a.reapedTotal != 3 || a.reapedOrphans != 2 || a.orphanedTotal != 2 {
		t.Fatalf("after reaping all: %+v", *a)
	}
	if a.liveChildren != 0 || a.liveAdopted != 0 {
		t.Fatalf("live %d adopted %d after reaping all", a.liveChildren, a.liveAdopted)
	}
}

// A zombie the scan saw is not live; reaping it must not take it out of
// the live counts a second time (issue 8: live 1 / adopted 0 where the
// truth was 2 / 1). The same for the runner seen as a zombie.
func TestAccountingZombieSeenThenReaped(t *testing.T) {
	a := newAccounting(11)
	a.observe([]proc.Stat{
		{PID: 11, StartTime: 1, State: 'S'},
		{PID: 12, StartTime: 2, State: 'S'},
		{PID: 13, StartTime: 3, State: 'Z'},
	})
	if a.liveChildren != 2 || a.liveAdopted != 1 {
		t.Fatalf("after the scan: live %d adopted %d, want 2 1", a.liveChildren, a.liveAdopted)
	}
	a.reaped(13, 0)
	if a.liveChildren != 2 || a.liveAdopted != 1 {
		t.Fatalf("after reaping the zombie the scan saw: live %d adopted %d, want 2 1", a.liveChildren, a.liveAdopted)
	}
	if a.reapedOrphans != 1 || a.orphanedTotal != 2 {
		t.Fatalf("reapedOrphans %d orphanedTotal %d, want 1 2", a.reapedOrphans, a.orphanedTotal)
	}
	a.reaped(12, 0)
	if a.liveChildren != 1 || a.liveAdopted != 0 {
		t.Fatalf("after reaping the live orphan: live %d adopted %d, want 1 0", a.liveChildren, a.liveAdopted)
	}

	// The runner exits, a scan sees it as a zombie, then it is reaped.
	a.observe([]proc.Stat{{PID: 11, StartTime: 1, State: 'Z'}})
	if a.liveChildren != 0 {
		t.Fatalf("runner a zombie: live %d, want 0", a.liveChildren)
	}
	a.reaped(11, 3)
	if a.liveChildren != 0 || a.liveAdopted != 0 || !a.runnerReaped || a.runnerExitCode != 3 {
		t.Fatalf("after reaping the runner: %+v", *a)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name   string
		status unix.WaitStatus
		want   int
	}{
		{"exit 0", 0, 0},
		{"exit 7", 7 << 8, 7},
		{"exit 255", 255 << 8, 255},
		{"SIGKILL", unix.WaitStatus(unix.SIGKILL), 137},
		{"SIGTERM with core flag", unix.WaitStatus(unix.SIGTERM) | 0x80, 143},
		{"stopped by SIGSTOP", unix.WaitStatus(unix.SIGSTOP)<<8 | 0x7f, 1},
		{"continued", 0xffff, 1},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.status); got != tt.want {
			t.Errorf("%s: ExitCode(%#x) = %d, want %d", tt.name, uint32(tt.status), got, tt.want)
		}
	}
}
