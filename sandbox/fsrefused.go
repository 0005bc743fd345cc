package sandbox

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/corral-sh/corral/sandbox/internal/stage"
)

// Writes the engine's checker refused (a protected path, outside the
// writable paths, beneath --hide): named once per path on stderr, at
// most maxWritesNamed paths, then once that more were refused (SPEC,
// "Refusals are named").
const maxWritesNamed = 20

// writesNamed are the paths said so far; one per run (the network
// session's, which every refusal reaches).
type writesNamed struct {
	sync.Mutex
	paths map[string]bool
	more  bool
}

// say names r on p's stderr, the first time its path is refused.
func (w *writesNamed) say(p *stage.Proc, r stage.Refused) {
	w.Lock()
	if w.paths == nil {
		w.paths = map[string]bool{}
	}
	say, more := false, false
	switch {
	case w.paths[r.Path]:
	case len(w.paths) < maxWritesNamed:
		w.paths[r.Path], say = true, true
	case !w.more:
		w.more, more = true, true
	}
	w.Unlock()
	if say {
		p.Warnf("sandbox: refused write to %s: %s", escapePath(r.Path), r.Reason)
	}
	if more {
		p.Warnf("sandbox: more writes refused than are named here (%d paths named)", maxWritesNamed)
	}
}

// escapePath keeps a path the runner chose from reaching a terminal as
// control characters or invalid UTF-8.
func escapePath(p string) string {
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			q := strconv.Quote(p)
			return q[1 : len(q)-1]
		}
	}
	if !utf8.ValidString(p) {
		q := strconv.Quote(p)
		return q[1 : len(q)-1]
	}
	return p
}
