package reaper

// Document is the engine's state as it reports it to a StateWriter:
// exactly these keys, in this order. The order is alphabetical, and
// encoding/json keeps struct order, so the bytes of a state file stay
// stable across writes.
type Document struct {
	ActiveChildren        int    `json:"active_children"`
	AdoptedChildren       int    `json:"adopted_children"`
	Escalated             bool   `json:"escalated"`
	OrphanedChildrenTotal int    `json:"orphaned_children_total"`
	Phase                 string `json:"phase"` // starting, running, terminating, exited
	ReapedChildrenTotal   int    `json:"reaped_children_total"`
	ReapedOrphansTotal    int    `json:"reaped_orphans_total"`
	RunnerExitCode        *int   `json:"runner_exit_code"`   // nil until the runner is reaped
	TerminationSignal     *int   `json:"termination_signal"` // nil unless a signal cancelled the run
	// UpdatedAt is left empty by the engine: the writer stamps it (corral's
	// state file: RFC 3339 UTC with microseconds, e.g.
	// 2026-11-29T12:00:00.123456Z).
	UpdatedAt string `json:"updated_at"`
}

// StateWriter receives the engine's Document each time it changes. Write
// is called from the engine's goroutine only, and should not block for
// long: the engine reaps and forwards signals between writes. Its error
// is ignored (the state is observability, never control): a writer
// reports its own failures.
//
// corral's state file writer (an atomic rename in a directory held open
// from the start) is one StateWriter; a library caller can pass its own.
type StateWriter interface {
	Write(Document) error
}

func (e *engine) document() Document {
	a := e.acct
	doc := Document{
		ActiveChildren:        a.liveChildren,
		AdoptedChildren:       a.liveAdopted,
		Escalated:             e.escalated,
		OrphanedChildrenTotal: a.orphanedTotal,
		Phase:                 e.phase.name(),
		ReapedChildrenTotal:   a.reapedTotal,
		ReapedOrphansTotal:    a.reapedOrphans,
	}
	if a.runnerReaped {
		code := e.exitCode()
		doc.RunnerExitCode = &code
	}
	if e.termSignal != 0 {
		s := int(e.termSignal)
		doc.TerminationSignal = &s
	}
	return doc
}

// writeState writes the document when it differs from the last one written.
func (e *engine) writeState() {
	if e.cfg.State == nil {
		return
	}
	doc := e.document()
	if e.written != nil && sameDocument(*e.written, doc) {
		return
	}
	_ = e.cfg.State.Write(doc) // the writer reports its own failure, once
	e.written = &doc
}

func sameDocument(a, b Document) bool {
	sameInt := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if !sameInt(a.RunnerExitCode, b.RunnerExitCode) || !sameInt(a.TerminationSignal, b.TerminationSignal) {
		return false
	}
	a.RunnerExitCode, b.RunnerExitCode = nil, nil
	a.TerminationSignal, b.TerminationSignal = nil, nil
	return a == b
}
