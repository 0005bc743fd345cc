package probe

import (
	"strings"

	"github.com/corral-sh/corral/internal/setuperr"
	"github.com/corral-sh/corral/sandbox/internal/explain"
	"github.com/moby/sys/capability"
	"golang.org/x/sys/unix"
)

// probeUserns is the probe's answer for user namespaces: each step
// pidns mode takes, tried alone, so a refused uid map is not reported as
// user namespaces being disabled.
func probeUserns() Check {
	c := Check{Name: "user namespaces"}
	step, err := explain.DiagnoseUserns()
	switch {
	case step == "":
		c.Available = true
	case strings.HasPrefix(step, "clone("), step == explain.IDMapsStep:
		c.Detail = (&setuperr.SetupError{Step: step, Err: err, Hint: explain.RefusalHint(explain.ReadFacts(), step, err, unix.CLONE_NEWUSER, true)}).Error()
	default:
		f := explain.ReadFacts()
		why := "available, but " + step + " failed"
		if strings.Contains(step, "uid_map") && f.UID == 0 && !f.Has(capability.CAP_SETFCAP) {
			why = "available, but uid 0 without CAP_SETFCAP cannot map itself"
		}
		c.Detail = why + ": " + (&setuperr.SetupError{Step: step, Err: err, Hint: explain.RefusalHint(f, step, err, unix.CLONE_NEWUSER, true)}).Error()
	}
	return c
}

// withNoNewPrivsNote adds to the probe's seccomp answer what corral can
// see of its own state: a filter it already runs under, and no_new_privs
// inherited (Kubernetes' allowPrivilegeEscalation: false sets it), which
// nothing can clear for the runner.
func withNoNewPrivsNote(c Check) Check {
	f := explain.ReadFacts()
	var notes []string
	if f.Seccomp == "2" {
		notes = append(notes, "corral itself runs under a seccomp filter (Seccomp: 2)")
	}
	if f.NoNewPrivs == "1" {
		notes = append(notes, "no_new_privs is inherited (NoNewPrivs: 1), so it stays set for the runner whatever is asked")
	}
	for _, n := range notes {
		if c.Detail != "" {
			c.Detail += "; "
		}
		c.Detail += n
	}
	return c
}
