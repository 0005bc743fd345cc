package stage

import (
	"fmt"
	"io"
	"sync"

	"github.com/corral-sh/corral/reaper"
)

// Proc is what a role's process holds besides the plan: where it writes,
// whether it says more (-v), its signal registration and what it inherited
// from its caller. Each process makes its own; nothing of it crosses.
type Proc struct {
	Stderr  io.Writer
	Verbose bool
	Caller  Caller

	mu   sync.Mutex
	sigs *reaper.Signals
}

// NewProc returns a process's context; sigs nil: registered when first
// needed (Signals).
func NewProc(stderr io.Writer, verbose bool, caller Caller, sigs *reaper.Signals) *Proc {
	return &Proc{Stderr: stderr, Verbose: verbose, Caller: caller, sigs: sigs}
}

// Signals returns the process's signal registration, making it if needed.
func (p *Proc) Signals() *reaper.Signals {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sigs == nil {
		p.sigs = reaper.CatchSignals()
	}
	return p.sigs
}

// Logf writes a -v line; a nil Proc says nothing (the probe's checks).
func (p *Proc) Logf(format string, a ...any) {
	if p != nil && p.Verbose {
		p.Warnf(format, a...)
	}
}

// Warnf writes a line whatever -v says.
func (p *Proc) Warnf(format string, a ...any) {
	p.Signals().WaitUrgent() // a closed stderr must not kill corral
	fmt.Fprintf(p.Stderr, "corral: "+format+"\n", a...)
}

// Log is Logf for the engine's Config.Logf: nil without -v.
func (p *Proc) Log() func(string, ...any) {
	if !p.Verbose {
		return nil
	}
	return p.Logf
}
