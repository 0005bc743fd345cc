package test

// A call the socket checker makes for the runner carries the runner's
// privileges (issue 33, finding 8; SPEC, Privileges): corral as root, or
// the pidns init, holds capabilities the runner does not, and must not
// lend them.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// A capability-less runner cannot chown a file, nor set a file
// capability (a security.* xattr), beneath --writable, in any mode: in
// subreaper mode corral makes those calls, with the runner's privileges
// (issue 33, finding 8), in namespace modes the kernel does. A change
// the runner's uid may make still works.
func TestCheckerMetadataCarriesRunnerPrivileges(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		w := e.file("w")
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(w, "f")
		if err := os.WriteFile(f, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{w, f} {
			if err := os.Chown(p, m.uid(), m.uid()); err != nil {
				t.Fatal(err)
			}
		}
		ops := []string{"chown:" + f + ":1234:1234", "setcap:" + f, "chmod:" + f + ":700"}
		res := e.run(e.args([]string{"--writable", w}, e.helper(append([]string{"meta"}, ops...)...)))
		wantCode(t, res, 0)
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			if op, r, ok := strings.Cut(line, "="); ok {
				got[op] = r
			}
		}
		for _, op := range ops[:2] {
			// In a user namespace of its own (pidns as uid 65534) uid
			// 1234 is not mapped: EINVAL, a refusal all the same.
			if got[op] != "EPERM" && !(m.uid() != 0 && m.pidns() && got[op] == "EINVAL") {
				t.Errorf("%s by a capability-less runner: want EPERM, got %q (%v)", op, got[op], res)
			}
		}
		if got[ops[2]] != "ok" {
			t.Errorf("%s of its own file: want ok, got %q", ops[2], got[ops[2]])
		}
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil || int(st.Uid) != m.uid() {
			t.Errorf("the file's owner changed: uid %d (%v)", st.Uid, err)
		}
		if n, _ := unix.Getxattr(f, "security.capability", make([]byte, 64)); n > 0 {
			t.Errorf("the file got a capability")
		}
	})
}
