package plan

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The resource numbers are written out so that the plan makes no system
// call and imports no system-call package: they must be the kernel's.
func TestRlimitNumbersAreTheKernels(t *testing.T) {
	want := map[string]int{
		"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_CPU": unix.RLIMIT_CPU,
		"RLIMIT_DATA": unix.RLIMIT_DATA, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS,
		"RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK, "RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE,
		"RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_RSS": unix.RLIMIT_RSS,
		"RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO, "RLIMIT_RTTIME": unix.RLIMIT_RTTIME,
		"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING, "RLIMIT_STACK": unix.RLIMIT_STACK,
	}
	if len(want) != len(rlimitNames) {
		t.Fatalf("%d names, want %d", len(rlimitNames), len(want))
	}
	for name, n := range want {
		if rlimitNames[name] != n {
			t.Errorf("%s = %d, the kernel's is %d", name, rlimitNames[name], n)
		}
	}
	if RlimInfinity != uint64(unix.RLIM_INFINITY) {
		t.Errorf("RlimInfinity = %d, want %d", uint64(RlimInfinity), uint64(unix.RLIM_INFINITY))
	}
}
