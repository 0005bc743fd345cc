package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummaryLine(t *testing.T) {
	home := t.TempDir()
	claude := filepath.Join(home, ".claude")
	if err := os.Mkdir(claude, 0o755); err != nil {
		t.Fatal(err)
	}
	hide := filepath.Join(home, "secret")
	count := func(paths ...string) *writesNamed {
		w := &writesNamed{groups: map[group]int{}}
		for _, p := range paths {
			w.total++
			reason, p, _ := strings.Cut(p, "|") // "a protected path|PATH"
			if p == "" {
				reason, p = "", reason
			}
			w.groups[groupOf(p, reason, []string{hide})]++
		}
		return w
	}
	t.Setenv("HOME", home)
	for _, c := range []struct {
		name  string
		w     *writesNamed
		dests []string
		more  bool
		want  string
	}{
		{"nothing", count(), nil, false, ""},
		{"writes", count(claude+"/a.json", claude+"/b/c", "/tmp/x"), nil, false,
			"sandbox: 3 writes refused, under ~/.claude (2), /tmp (1): --writable allows them"},
		// Never a folder as broad as $HOME, /etc, /proc: the file instead.
		{"broad", count(home+"/.claude.json", "/etc/hosts", "/proc/1/uid_map"), nil, false,
			"sandbox: 3 writes refused, under /etc/hosts (1), /proc/1/uid_map (1), ~/.claude.json (1): --writable allows them"},
		{"hide", count(hide + "/k"), nil, false, "sandbox: 1 write refused, beneath --hide ~/secret (1)"},
		// A protected path is named by itself: the folder's --writable
		// is given already.
		{"protected", count("a protected path (.envrc)|/p/.envrc", "a protected path (.envrc)|/p/.envrc", "/tmp/x"), nil, false,
			"sandbox: 3 writes refused, under /tmp (1), to protected paths /p/.envrc (2) (a --writable naming one re-grants it): --writable allows them"},
		{"both", count("/tmp/x"), []string{"a.example:443", "b.example:443"}, false,
			"sandbox: 1 write refused, under /tmp (1); network: 2 hosts refused (a.example:443, b.example:443): --writable, --allow-net allow them"},
		{"hosts", count(), []string{"a:1", "b:1", "c:1", "d:1", "e:1"}, false,
			"sandbox: network: 5 hosts refused (a:1, b:1, c:1, d:1, …): --allow-net allows them"},
		{"more hosts", count(), []string{"a:1"}, true, "sandbox: network: over 1 host refused (a:1, …): --allow-net allows them"},
		{"escaped", count("/tmp/a\x1b[2Jb"), nil, false, `sandbox: 1 write refused, under /tmp (1): --writable allows them`},
	} {
		if got := summaryLine(c.w, c.dests, c.more, home); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestEscapePath(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/plain":       "/tmp/plain",
		"/tmp/é":           "/tmp/é",
		"/tmp/a\nb":        `/tmp/a\nb`,
		"/tmp/\x1b[31mred": `/tmp/\x1b[31mred`,
		"/tmp/\xff\xfe":    `/tmp/\xff\xfe`,
		"/tmp/\u009bcsi":   `/tmp/\u009bcsi`,
	} {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
	}
}
