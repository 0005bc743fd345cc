package reaper

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loop is the engine's one wait: for SIGCHLD, for a signal, or for the
// next deadline (state refresh, end of the grace, teardown rescan). With
// no deadline pending the timer is stopped and the engine sleeps until a
// signal arrives.
func (e *engine) loop() {
	for e.phase != phaseExited {
		e.arm()
		select {
		case <-e.watch.ready:
			e.reap()
			e.afterReap()
			e.watch.reaped()
		case <-e.sig.children: // until SIGCHLD is reset (defaultChildSignal)
			e.reap()
			e.afterReap()
		case s := <-e.sig.incoming:
			e.onSignal(s.(syscall.Signal))
		case <-e.timer.C:
			e.onTimer(time.Now())
		case <-e.deadline.c: // nil without a timeout
			e.onDeadline()
		}
		e.advance()
	}
}

func (e *engine) push(ev event) { e.events = append(e.events, ev) }

// advance feeds the pending events to the state machine and performs
// each new phase's entry actions, which may push further events.
func (e *engine) advance() {
	for len(e.events) > 0 {
		ev := e.events[0]
		e.events = e.events[1:]
		if p := next(e.phase, ev); p != e.phase {
			e.enter(p)
		}
	}
}

func (e *engine) enter(p phase) {
	if e.phase == phaseTerminating {
		e.sayJoined() // teardown.go
	}
	e.phase = p
	if p > phaseRunning {
		e.watch.eager.Store(true) // each exit may hand over children to signal
	}
	now := time.Now()
	switch p {
	case phaseRunning:
		e.scheduleTick(now)
		e.observe()
		e.writeState()
	case phaseTerminating:
		e.observe()
		e.writeState()
		e.graceEnd = now.Add(e.cfg.Grace)
		sent := e.termRound(now)
		if e.noChildren {
			e.push(evTreeEmpty)
			break
		}
		e.cfg.Logf("teardown: %s to %s, grace %v", unix.SignalName(e.teardownSignal()), processes(sent), e.cfg.Grace)
		if e.cfg.Grace <= 0 {
			e.push(evGraceOver)
		}
	case phaseKilling:
		e.nextScan = time.Time{}
		e.killRound(now)
		e.writeState()
		if e.noChildren {
			e.push(evTreeEmpty)
		}
	case phaseExited:
		e.nextScan, e.nextTick = time.Time{}, time.Time{}
		e.observe()
		e.writeState()
	}
}

func (e *engine) onTimer(now time.Time) {
	if !e.nextTick.IsZero() && !now.Before(e.nextTick) {
		e.observe()
		e.writeState()
		e.scheduleTick(now)
	}
	if e.phase == phaseTerminating && !now.Before(e.graceEnd) {
		e.push(evGraceOver)
		return
	}
	if !e.nextScan.IsZero() && !now.Before(e.nextScan) {
		switch e.phase {
		case phaseTerminating:
			e.termRound(now)
		case phaseKilling:
			e.killRound(now)
		}
	}
}

// afterReap brings the next teardown round forward: the exit just reaped
// may have handed its children to the engine.
func (e *engine) afterReap() {
	if e.noChildren {
		return
	}
	switch e.phase {
	case phaseTerminating:
		e.scanStep = scanMin
		if soon := e.lastScan.Add(scanMin); e.nextScan.IsZero() || soon.Before(e.nextScan) {
			e.nextScan = soon
		}
	case phaseKilling:
		// The exits just reaped handed their children to the engine, and
		// a round walks the tree: no more often than scanMin (each exit
		// wakes the loop, and a round per wake-up would walk a tree of
		// a thousand dying processes a thousand times).
		if soon := e.lastScan.Add(scanMin); e.nextScan.IsZero() || soon.Before(e.nextScan) {
			e.nextScan = soon
		}
	}
}

// arm points the timer at the earliest pending deadline, or stops it.
func (e *engine) arm() {
	var at time.Time
	for _, t := range []time.Time{e.nextTick, e.nextScan} {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if e.phase == phaseTerminating && (at.IsZero() || e.graceEnd.Before(at)) {
		at = e.graceEnd
	}
	if at.IsZero() {
		e.timer.Stop()
		return
	}
	e.timer.Reset(max(time.Until(at), 0))
}

func (e *engine) scheduleTick(now time.Time) {
	if e.cfg.State == nil || e.cfg.Poll <= 0 {
		return // nothing to refresh: no timer at all
	}
	e.nextTick = now.Add(e.cfg.Poll)
}
