package reaper

import "testing"

// Every transition of the state machine, and every event that must leave
// a phase alone.
func TestPhaseTransitions(t *testing.T) {
	all := []event{evStarted, evCancel, evRunnerExited, evGraceOver, evTreeEmpty}
	moves := map[phase]map[event]phase{
		phaseStarting:    {evStarted: phaseRunning, evCancel: phaseExited},
		phaseRunning:     {evRunnerExited: phaseTerminating, evCancel: phaseTerminating},
		phaseTerminating: {evTreeEmpty: phaseExited, evCancel: phaseKilling, evGraceOver: phaseKilling},
		phaseKilling:     {evTreeEmpty: phaseExited},
		phaseExited:      {},
	}
	for from, to := range moves {
		for _, ev := range all {
			want, ok := to[ev]
			if !ok {
				want = from
			}
			if got := next(from, ev); got != want {
				t.Errorf("next(%s, %d) = %s, want %s", from.name(), ev, got.name(), want.name())
			}
		}
	}
}

// The paths a run takes, as the engine feeds them.
func TestPhasePaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []event
		want   []phase
	}{
		{"plain exit, tree empty at once", []event{evStarted, evRunnerExited, evTreeEmpty},
			[]phase{phaseRunning, phaseTerminating, phaseExited}},
		{"helpers leave within the grace", []event{evStarted, evRunnerExited, evGraceOver, evTreeEmpty},
			[]phase{phaseRunning, phaseTerminating, phaseKilling, phaseExited}},
		{"cancel, second cancel skips the grace", []event{evStarted, evCancel, evCancel, evGraceOver, evTreeEmpty},
			[]phase{phaseRunning, phaseTerminating, phaseKilling, phaseKilling, phaseExited}},
		{"cancel, the tree empties within the grace", []event{evStarted, evCancel, evTreeEmpty, evGraceOver},
			[]phase{phaseRunning, phaseTerminating, phaseExited, phaseExited}},
		{"runner exits, a cancel during the grace skips the rest", []event{evStarted, evRunnerExited, evCancel, evTreeEmpty},
			[]phase{phaseRunning, phaseTerminating, phaseKilling, phaseExited}},
		{"killing ignores further cancels and the grace's end", []event{evStarted, evCancel, evGraceOver, evCancel, evGraceOver, evTreeEmpty},
			[]phase{phaseRunning, phaseTerminating, phaseKilling, phaseKilling, phaseKilling, phaseExited}},
		{"cancel before the runner exists", []event{evCancel, evStarted},
			[]phase{phaseExited, phaseExited}},
		{"tree empty while running changes nothing", []event{evStarted, evTreeEmpty, evRunnerExited, evTreeEmpty},
			[]phase{phaseRunning, phaseRunning, phaseTerminating, phaseExited}},
	} {
		p := phaseStarting
		for i, ev := range tc.events {
			p = next(p, ev)
			if p != tc.want[i] {
				t.Errorf("%s: after event %d (%d) phase %s, want %s", tc.name, i, ev, p.name(), tc.want[i].name())
				break
			}
		}
	}
}

func TestPhaseNames(t *testing.T) {
	for p, want := range map[phase]string{
		phaseStarting: "starting", phaseRunning: "running", phaseTerminating: "terminating",
		phaseKilling: "terminating", phaseExited: "exited",
	} {
		if p.name() != want {
			t.Errorf("phase %d name %q, want %q", p, p.name(), want)
		}
	}
}
