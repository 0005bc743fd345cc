package reaper

import (
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/exitstatus"
)

// A runner that outlives the timeout is cancelled as by SIGTERM, and the
// run's status is 124 whatever the runner's was.
func TestEngineTimeoutCancels(t *testing.T) {
	res, doc := runEngine(t, Config{
		Start:   shell(`trap "" TERM; while :; do sleep 0.01; done`),
		Grace:   50 * time.Millisecond,
		Timeout: 100 * time.Millisecond,
	})
	if res.ExitCode != ExitTimeout || res.TerminationSignal != 15 || !res.Escalated {
		t.Fatalf("res %+v, want exit %d, SIGTERM recorded, escalated", res, ExitTimeout)
	}
	if doc.RunnerExitCode == nil || *doc.RunnerExitCode != ExitTimeout || doc.TerminationSignal == nil || *doc.TerminationSignal != 15 || !doc.Escalated {
		t.Fatalf("state %+v, want runner_exit_code %d, termination_signal 15, escalated", doc, ExitTimeout)
	}
}

// A runner that finishes first keeps its own status, and nothing is
// recorded as a cancel.
func TestEngineTimeoutNotReached(t *testing.T) {
	res, doc := runEngine(t, Config{Start: shell("exit 3"), Grace: time.Second, Timeout: time.Hour})
	if res.ExitCode != 3 || res.TerminationSignal != 0 || doc.TerminationSignal != nil || *doc.RunnerExitCode != 3 {
		t.Fatalf("res %+v doc %+v, want the runner's own status 3 and no termination signal", res, doc)
	}
}

// ExitTimeout is written out, so that the library's API names no internal
// package; it must stay corral's own timeout status.
func TestExitTimeoutIsCorrals(t *testing.T) {
	if ExitTimeout != exitstatus.Timeout {
		t.Fatalf("ExitTimeout is %d, internal/exitstatus.Timeout is %d", ExitTimeout, exitstatus.Timeout)
	}
}
