package test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestStateCountsOrphansWhileRunnerRuns: while the runner runs, the
// engine's watcher reaps orphans without waking the engine for each (it
// queues their exits, up to a batch); every state refresh must still
// count each one. 300 is not a multiple of the batch, so a refresh that
// missed the queue shows a short count until the runner exits.
func TestStateCountsOrphansWhileRunnerRuns(t *testing.T) {
	const orphans = 300
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		state, release := e.file("state.json"), e.file("release")
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do (/bin/true &); i=$((i+1)); done
while [ ! -e %s ]; do sleep 0.01; done`, orphans, release)
		c := e.start(e.args(opts(state, "5"), []string{"/bin/sh", "-c", script}))
		deadline := time.Now().Add(readyTimeout)
		var last map[string]any
		for {
			if data, err := os.ReadFile(state); err == nil && json.Unmarshal(data, &last) == nil &&
				last["phase"] == "running" && last["reaped_orphans_total"] == float64(orphans) {
				break
			}
			if c.exited() || time.Now().After(deadline) {
				t.Fatalf("the state never counted %d reaped orphans while the runner ran (last %v): %s", orphans, last, c.partial())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res := c.wait(corralTimeout)
		wantCode(t, res, 0)
		e.assertGone()
		doc := readState(t, state)
		wantState(t, doc, map[string]any{"reaped_orphans_total": orphans, "orphaned_children_total": orphans,
			"reaped_children_total": orphans + 1, "active_children": 0})
	})
}
