package test

// A call the socket checker makes for the runner carries the runner's
// privileges (issue 33, finding 8; SPEC, Privileges): corral as root, or
// the pidns init, holds capabilities the runner does not, and must not
// lend them.

import (
	"strconv"
	"testing"
)

// A capability-less runner's bind below 1024 goes through the checker
// (which makes the bind itself) and is refused as the kernel refuses the
// runner's own: EACCES. A bind on a high port still works. Before the fix
// the checker bound 127.0.0.1:81 with its own CAP_NET_BIND_SERVICE.
func TestCheckerCallsCarryRunnerPrivileges(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		high := freePort(t, "127.0.0.1")
		low := "bind:81"
		hi := "bind:" + strconv.Itoa(high)
		for _, policy := range [][]string{
			{"--allow-net", "x.test:443"},
			{"--net", "none", "--publish", strconv.Itoa(high)},
		} {
			res := e.run(e.args(netOpts(policy...), e.helper("checker-try", low, hi)), e.markerEnv())
			wantCode(t, res, 0)
			wantTried(t, res, map[string][]string{low: {"EACCES"}, hi: ok})
		}
		e.assertGone()
	})
}
