package runner

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"github.com/corral-sh/corral/sandbox/internal/stage"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// applyPrivileges applies p to the calling thread in the one order that
// works: rlimits (need CAP_SYS_RESOURCE to raise, so before the drop), the
// bounding set (needs CAP_SETPCAP, which the capset drops), the permitted,
// effective and inheritable sets, the ambient set (needs its caps in
// permitted and inheritable), then no_new_privs; then it reads the result
// back and refuses to go on with more than was asked. It returns what it
// read back.
func applyPrivileges(p plan.Privileges) (threadStatus, error) {
	for _, rl := range p.Rlimits {
		// syscall.Setrlimit, not unix.Prlimit: Go restores the RLIMIT_NOFILE
		// it saw at start-up across exec unless told through this call.
		lim := syscall.Rlimit{Cur: rl.Soft, Max: rl.Hard}
		if err := syscall.Setrlimit(rl.Resource, &lim); err != nil {
			return nil, &setuperr.SetupError{Step: "set " + rl.String(), Err: err,
				Hint: "raising a hard limit needs CAP_SYS_RESOURCE; keep HARD at or below the current one"}
		}
	}

	held, err := stage.ThreadCaps()
	if err != nil {
		return nil, &setuperr.SetupError{Step: "read capabilities", Err: err}
	}
	// Every set is written whole below, so nothing is loaded into caps:
	// its Load would read and scan /proc/self/status for what capget
	// already answered.
	caps, err := capability.NewPid2(0)
	if err != nil {
		return nil, &setuperr.SetupError{Step: "read capabilities", Err: err}
	}
	hadSetpcap := held.Effective&(1<<uint(capability.CAP_SETPCAP)) != 0
	keep := make([]capability.Cap, 0, len(p.Keep))
	for _, c := range p.Keep {
		keep = append(keep, capability.Cap(c))
		if held.Permitted&(1<<uint(c)) == 0 {
			return nil, &setuperr.SetupError{Step: "keep " + plan.CapName(c), Err: unix.EPERM,
				Hint: "corral does not hold it; run corral as root, or in pidns mode where it owns a user namespace"}
		}
	}
	all := capability.CAPS | capability.BOUNDS | capability.AMBS
	caps.Clear(all)
	caps.Set(all, keep...)
	// Without CAP_SETPCAP the bounding set cannot shrink; the library then
	// leaves it as it is, and the check below decides whether that is safe.
	for _, kind := range []capability.CapType{capability.BOUNDS, capability.CAPS, capability.AMBS} {
		if err := caps.Apply(kind); err != nil {
			return nil, &setuperr.SetupError{Step: "drop capabilities (" + kind.String() + ")", Err: err}
		}
	}
	if !p.AllowNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return nil, &setuperr.SetupError{Step: "set no_new_privs", Err: err}
		}
	}
	return verifyPrivileges(p, hadSetpcap)
}

// threadStatus is what the read-back found: the Cap* sets, NoNewPrivs and
// TracerPid.
type threadStatus map[string]uint64

// verifyPrivileges reads the thread's sets back from the kernel.
func verifyPrivileges(p plan.Privileges, hadSetpcap bool) (threadStatus, error) {
	status, err := readThreadStatus()
	if err != nil {
		return nil, &setuperr.SetupError{Step: "verify privileges", Err: err}
	}
	var want uint64
	for _, c := range p.Keep {
		want |= 1 << uint(c)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if got := status[set]; got != want {
			return nil, &setuperr.SetupError{Step: "verify privileges", Err: fmt.Errorf("%s is %016x, want %016x", set, got, want)}
		}
	}
	if got := status["CapBnd"]; got&^want != 0 {
		// An unprivileged caller cannot shrink the bounding set. With
		// no_new_privs no execve can gain from it (setuid bits and file
		// capabilities are ignored), so the runner holds nothing more:
		// also when --allow-new-privs was asked but no_new_privs was
		// inherited, since it can never be cleared.
		switch {
		case hadSetpcap:
			return nil, &setuperr.SetupError{Step: "drop the bounding set", Err: fmt.Errorf("CapBnd is %016x, want %016x", got, want)}
		case p.AllowNewPrivs && status["NoNewPrivs"] != 1:
			return nil, &setuperr.SetupError{Step: "drop the bounding set", Err: fmt.Errorf("CapBnd is %016x, want %016x", got, want),
				Hint: "corral lacks CAP_SETPCAP, so it cannot shrink the bounding set, and with --allow-new-privs a setuid or file-capability program could gain what is left in it; drop --allow-new-privs"}
		}
	}
	// With --allow-new-privs, NoNewPrivs may still be 1 when corral itself
	// inherited it: it cannot be cleared, and it only takes privilege away.
	if nnp := status["NoNewPrivs"]; !p.AllowNewPrivs && nnp != 1 {
		return nil, &setuperr.SetupError{Step: "verify privileges", Err: fmt.Errorf("NoNewPrivs is %d", nnp)}
	}
	return status, nil
}

// readThreadStatus returns the Cap* sets (hex), NoNewPrivs and TracerPid
// of this thread, read with open, read and close alone (proc.ReadStatus),
// not through the runtime's poller.
func readThreadStatus() (threadStatus, error) {
	fields, err := proc.ReadStatus("/proc/thread-self/status")
	if err != nil {
		return nil, err
	}
	return statusNumbers(fields)
}

func statusNumbers(fields map[string]string) (threadStatus, error) {
	out := threadStatus{}
	// TracerPid is only informative (forkHeld): absent, it is 0.
	if v, err := strconv.ParseUint(fields["TracerPid"], 10, 64); err == nil {
		out["TracerPid"] = v
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"} {
		value, ok := fields[k]
		if !ok {
			return nil, fmt.Errorf("status has no %s", k)
		}
		base := 16
		if k == "NoNewPrivs" {
			base = 10
		}
		v, err := strconv.ParseUint(value, base, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}
