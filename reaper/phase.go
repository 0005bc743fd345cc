package reaper

// The engine's phases and the one function that moves between them. The
// engine turns what happens (a wait4 result, a signal, a deadline) into
// events, and performs a phase's entry actions when next moves it there;
// no other code changes the phase.
//
//	starting ──started──▶ running ──runner exited / cancel──▶ terminating
//	    │                                                      │      │
//	  cancel (the runner never starts)    grace over / 2nd cancel   tree empty
//	    ▼                                                      ▼      ▼
//	  exited ◀──────────── tree empty ───────────────────── killing  exited
type phase uint8

const (
	phaseStarting    phase = iota // registered, the runner not started yet
	phaseRunning                  // the runner lives
	phaseTerminating              // the teardown signal sent; the grace runs
	phaseKilling                  // SIGKILL rounds until the tree is empty
	phaseExited                   // the tree is empty; the status is known
)

// name is the phase as the state file shows it: killing is part of
// terminating there.
func (p phase) name() string {
	switch p {
	case phaseStarting:
		return "starting"
	case phaseRunning:
		return "running"
	case phaseTerminating, phaseKilling:
		return "terminating"
	}
	return "exited"
}

type event uint8

const (
	evStarted      event = iota // the runner process exists
	evCancel                    // a cancelling signal arrived
	evRunnerExited              // wait4 returned the runner
	evGraceOver                 // the grace period ended (at once with grace 0)
	evTreeEmpty                 // wait4 said ECHILD: nothing is left below the engine
)

// next is the engine's state machine. An event that means nothing in a
// phase leaves it unchanged. The shortcuts: a tree found empty ends the
// teardown at once, whatever is left of the grace, and a second cancel
// during the grace skips the rest of it.
func next(p phase, ev event) phase {
	switch p {
	case phaseStarting:
		switch ev {
		case evStarted:
			return phaseRunning
		case evCancel:
			return phaseExited
		}
	case phaseRunning:
		switch ev {
		case evRunnerExited, evCancel:
			return phaseTerminating
		}
	case phaseTerminating:
		switch ev {
		case evTreeEmpty:
			return phaseExited
		case evCancel, evGraceOver:
			return phaseKilling
		}
	case phaseKilling:
		if ev == evTreeEmpty {
			return phaseExited
		}
	}
	return p
}
