package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The end-of-run summary (SPEC, "Refusals are named"): one line, after a
// run with refusals, of everything the policy refused — writes by the
// folder that would allow them, network destinations — and the options
// that allow each. A run with none prints nothing.

// summaryGroups and summaryHosts bound what the line lists; the rest is
// "…".
const (
	summaryGroups = 6
	summaryHosts  = 4
)

// summarize prints the summary on stderr once the run is over: in pidns
// mode after the init's last report was read (followInit).
func (n *network) summarize() {
	if n.followed != nil {
		select {
		case <-n.followed:
		case <-time.After(5 * time.Second): // a link that never ends: say what came
		}
	}
	dests, more := n.proxy.Refused()
	if line := summaryLine(&n.writes, dests, more, os.Getenv("HOME")); line != "" {
		n.p.Warnf("%s", line)
	}
}

// summaryLine is the summary's text without corral's prefix, or "".
func summaryLine(w *writesNamed, dests []string, more bool, home string) string {
	w.Lock()
	total := w.total
	type counted struct {
		g group
		n int
	}
	var gs []counted
	for g, k := range w.groups {
		gs = append(gs, counted{g, k})
	}
	w.Unlock()
	if total == 0 && len(dests) == 0 {
		return ""
	}
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].n != gs[j].n {
			return gs[i].n > gs[j].n
		}
		return gs[i].g.path < gs[j].g.path
	})
	var parts, allow []string
	if total > 0 {
		var under, hidden, protected []string
		for i, c := range gs {
			if i == summaryGroups {
				under = append(under, "…")
				break
			}
			s := fmt.Sprintf("%s (%d)", tilde(escapePath(c.g.path), home), c.n)
			switch {
			case c.g.hide:
				hidden = append(hidden, s)
			case c.g.protected:
				protected = append(protected, s)
			default:
				under = append(under, s)
			}
		}
		s := plural(total, "write") + " refused"
		if len(under) > 0 {
			s += ", under " + strings.Join(under, ", ")
			allow = append(allow, "--writable")
		}
		if len(hidden) > 0 {
			s += ", beneath --hide " + strings.Join(hidden, ", ")
		}
		if len(protected) > 0 {
			// A --writable of the folder is there already: only one
			// that names the protected path re-grants it.
			s += ", to protected paths " + strings.Join(protected, ", ") + " (a --writable naming one re-grants it)"
		}
		parts = append(parts, s)
	}
	if len(dests) > 0 {
		shown := dests
		if len(shown) > summaryHosts {
			shown = shown[:summaryHosts]
		}
		list := strings.Join(shown, ", ")
		if more || len(shown) < len(dests) {
			list += ", …"
		}
		count := plural(len(dests), "host")
		if more {
			count = "over " + count
		}
		parts = append(parts, fmt.Sprintf("network: %s refused (%s)", count, list))
		allow = append(allow, "--allow-net")
	}
	line := "sandbox: " + strings.Join(parts, "; ")
	switch len(allow) {
	case 0: // beneath --hide only: no option allows it but dropping that --hide
	case 1:
		line += ": " + allow[0] + " allows them"
	default:
		line += ": " + strings.Join(allow, ", ") + " allow them"
	}
	return line
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// tilde writes a path beneath $HOME as ~/...
func tilde(path, home string) string {
	home = filepath.Clean(home)
	if home == "" || home == "/" || home == "." {
		return path
	}
	if rest, ok := strings.CutPrefix(path, home+"/"); ok {
		return "~/" + rest
	}
	return path
}
