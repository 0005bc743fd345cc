package sandbox

import (
	"github.com/corral-sh/corral/internal/proc"
	"github.com/corral-sh/corral/sandbox/internal/probe"
)

// Check is one answer of the probe.
type Check = probe.Check

// ProbeReport is what `corral probe` prints.
type ProbeReport = probe.Report

// Probe finds out what this machine allows by trying each feature in a
// throwaway child. Nothing on the machine changes: children that made
// namespaces exit and take them along.
func Probe() ProbeReport { return probe.Run(probeDieWithParent) }

// probeDieWithParent tries the watch --die-with-parent would take, on the
// probe's own parent.
func probeDieWithParent() Check {
	c := Check{Name: "--die-with-parent"}
	if proc.PID1() {
		c.Detail = "corral is PID 1 here: its parent is outside its namespace (a usage error)"
		return c
	}
	w := WatchParent()
	defer w.Close()
	switch {
	case w.err != nil:
		c.Detail = w.err.Error()
	case w.gone:
		c.Available = true
		c.Detail = "corral's parent exited as the probe started: a run would be cancelled at once"
	default:
		if err := w.pollable(); err != nil {
			c.Detail = err.Error()
			return c
		}
		c.Available = true
		c.Detail = "the parent is watched through a pidfd"
		if w.pid == 1 {
			// A container's init (--init, tini, catatonit) or bubblewrap's.
			c.Detail += "; the parent here is PID 1 of corral's namespace, a live parent like any other"
		}
	}
	return c
}
