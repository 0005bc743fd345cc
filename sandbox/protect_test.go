package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// A linked worktree's .git is a file: it is protected, and so are the
// hooks and config of the repository it names; core.hooksPath, from the
// repository's config or the user's, names a protected folder.
func TestProtectFactsWorktree(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"main/.git/hooks", "main/.git/worktrees/wt", "wt", "home", "main/hooks-here"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"main/.git/HEAD":                   "ref: refs/heads/main\n",
		"main/.git/config":                 "[core]\n\tbare = false\n",
		"main/.git/worktrees/wt/HEAD":      "ref: refs/heads/wt\n",
		"main/.git/worktrees/wt/commondir": "../..\n",
		"wt/.git":                          "gitdir: " + root + "/main/.git/worktrees/wt\n",
		"home/.gitconfig":                  "[core]\n\thooksPath = " + root + "/main/hooks-here\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", root+"/home")
	run := plan.Plan{Privileges: plan.Privileges{Landlock: landlock.Policy{Writable: []string{root + "/wt", root + "/main"}}}}
	pr := withProtection(run, nil).Privileges.Protect
	for _, w := range []string{root + "/wt/.git", root + "/main/.git/hooks", root + "/main/.git/config", root + "/main/hooks-here"} {
		if !slices.Contains(pr.Paths, w) {
			t.Errorf("%s is not protected (%v)", w, pr.Paths)
		}
	}
	if !slices.Contains(pr.Pinned, root+"/main/.git") {
		t.Errorf("main/.git is not pinned (%v)", pr.Pinned)
	}
}

func TestHooksPath(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"[core]\nhooksPath = a\n", "a"},
		{"[Core]\n\tHooksPath=\"b c\"\n[user]\nhooksPath = no\n", "b c"},
		{"[core] hooksPath = d # x\n", "d"},
		{"[core]\nhooksPath = a\n[core]\nhookspath = e\n", "e"},
		{"[user]\nhooksPath = no\n", ""},
	} {
		f := filepath.Join(dir, "config")
		if err := os.WriteFile(f, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := hooksPath(f); got != c.want {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}
