package egress

import (
	"sort"
	"strings"
)

// Refused are the destinations the policy refused so far (each once,
// as stderr named them: HOST:PORT, or IP:PORT for a direct attempt),
// sorted, and how many were refused past the ones kept (maxDeniedLines):
// for the summary at the end of a run. Safe after Close.
func (p *Proxy) Refused() (dests []string, more bool) {
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.denied {
		switch {
		case k == "":
			more = true
		case strings.HasPrefix(k, "socket "):
			// A socket refused before it had a destination: no host.
		default:
			dests = append(dests, strings.TrimPrefix(k, "direct "))
		}
	}
	sort.Strings(dests)
	return dests, more
}
