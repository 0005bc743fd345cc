package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

func mkfiles(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		dir := filepath.Dir(p)
		if f[len(f)-1] == '/' {
			dir = p
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if dir == p {
			continue
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The mounts of a --writable project: the protected paths that exist,
// .git pinned, the hooks of a submodule and the folder core.hooksPath
// names; an explicit --writable re-grants one; a hidden path wins.
func TestLayout(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "proj")
	mkfiles(t, p, ".git/HEAD", ".git/hooks/", ".git/config", ".git/modules/lib/a/HEAD", ".git/modules/lib/a/config",
		".git/modules/lib/a/hooks/", ".envrc", ".vscode/tasks.json", ".claude/settings.local.json", ".claude/other.json",
		"src/main.go", "githooks/", "home/.bashrc", "secret/k", "settings.json")
	if err := os.WriteFile(p+"/.git/config", []byte("[core]\n\tbare = false\n\thooksPath = githooks ; comment\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The list as the host side makes it (plan.Protect): names that
	// may not exist, a pattern, the modules folder, .git pinned.
	prot := plan.Protection{
		Paths: []string{p + "/.envrc", p + "/.bashrc", p + "/.vscode", p + "/settings.json", p + "/githooks", p + "/home/.bashrc",
			p + "/.git/hooks", p + "/.git/config", p + "/.git/config.worktree"},
		Patterns: []string{p + "/.claude/settings*.json"},
		Pinned:   []string{p + "/.git"},
		Modules:  []string{p + "/.git/modules"},
	}
	m := layout(plan.Privileges{
		Landlock: landlock.Policy{Writable: []string{p, p + "/.vscode", root + "/missing"}, Hide: []string{p + "/secret"}},
		Protect:  prot,
	})
	if !m.readOnly {
		t.Error("--writable: the tree is not made read-only")
	}
	if want := []string{p, p + "/.vscode"}; !slices.Equal(m.writable, want) {
		t.Errorf("writable %v, want %v", m.writable, want)
	}
	if want := []string{p + "/.git"}; !slices.Equal(m.pinned, want) {
		t.Errorf("pinned %v, want %v", m.pinned, want)
	}
	want := []string{p + "/.envrc", p + "/.claude/settings.local.json", p + "/settings.json", p + "/githooks", p + "/home/.bashrc",
		p + "/.git/hooks", p + "/.git/config", p + "/.git/modules/lib/a/hooks", p + "/.git/modules/lib/a/config"}
	for _, w := range want {
		if !slices.Contains(m.protect, w) {
			t.Errorf("%s is not protected (%v)", w, m.protect)
		}
	}
	for _, not := range []string{p + "/.vscode", p + "/.claude/other.json", p + "/src/main.go", p + "/.bashrc"} {
		if slices.Contains(m.protect, not) {
			t.Errorf("%s is protected", not)
		}
	}
	if want := []string{p + "/secret"}; !slices.Equal(m.hide, want) {
		t.Errorf("hide %v, want %v", m.hide, want)
	}

	// A --writable beneath a protected path is bound writable again.
	m = layout(plan.Privileges{Landlock: landlock.Policy{Writable: []string{p, p + "/.git/hooks"}}, Protect: prot})
	if slices.Contains(m.protect, p+"/.git/hooks") || len(m.regrant) != 0 {
		t.Errorf("--writable .git/hooks: protect %v, regrant %v", m.protect, m.regrant)
	}
	mkfiles(t, p, ".git/hooks/sub/")
	m = layout(plan.Privileges{Landlock: landlock.Policy{Writable: []string{p, p + "/.git/hooks/sub"}}, Protect: prot})
	if !slices.Contains(m.protect, p+"/.git/hooks") || !slices.Equal(m.regrant, []string{p + "/.git/hooks/sub"}) {
		t.Errorf("--writable .git/hooks/sub: protect %v, regrant %v", m.protect, m.regrant)
	}

	// --hide alone: nothing read-only, the hidden path covered.
	m = layout(plan.Privileges{Landlock: landlock.Policy{Hide: []string{p + "/secret", p + "/secret/k"}}})
	if m.readOnly || len(m.protect) != 0 || !slices.Equal(m.hide, []string{p + "/secret"}) {
		t.Errorf("--hide alone: %+v", m)
	}
}
