package runner

// The protected paths beneath a writable one (SPEC, "Protected paths
// beneath a writable one"): files that run code the next time the user,
// outside any sandbox, uses the folder. Only the ones that exist when the
// runner starts can be mounts: a mount needs a file or folder to sit on,
// and making a placeholder would change the caller's folder.

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// topNames are protected at each writable path's top, and at $HOME's
// when $HOME is that path or lies beneath it.
var topNames = []string{
	".gitmodules", ".bashrc", ".bash_profile", ".bash_login", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".envrc",
	".vscode", ".idea", ".husky",
	".mcp.json", ".gemini/settings.json", ".codex/config.toml",
}

// Bounds on the walk of a repository's submodules: a runner's project is
// input, and the launch must not grow with it past these.
const (
	maxModuleDepth = 8
	maxModules     = 256
)

// protection is what protectedPaths found.
type protection struct {
	// paths are bound read-only: the protected files and folders that
	// exist.
	paths []string
	// pinned are bound onto themselves as they are: a repository's .git
	// folder, which then cannot be renamed, removed or replaced, while
	// its objects, refs, index and logs stay writable.
	pinned []string
}

// protectedPaths lists, for the writable paths (canonical), what exists
// of the protected paths: the repository each lies in or whose .git is at
// its top, the names at its top and at home's top when home lies beneath
// it, and extra (the settings file).
func protectedPaths(writable []string, home string, extra []string) protection {
	var pr protection
	add := func(p string) {
		// A symlink at a protected name is followed: what it leads to
		// is what the user's tools read. (The link itself can still be
		// replaced where its folder is writable.)
		c, ok := canonical(p)
		if !ok {
			return
		}
		pr.paths = appendNew(pr.paths, c)
	}
	tops := []string{}
	for _, w := range writable {
		tops = appendNew(tops, w)
		if home != "" && beneath(home, w) {
			tops = appendNew(tops, home)
		}
	}
	for _, top := range tops {
		for _, n := range topNames {
			add(filepath.Join(top, n))
		}
		if matches, err := filepath.Glob(filepath.Join(top, ".claude", "settings*.json")); err == nil {
			for _, m := range matches {
				add(m)
			}
		}
	}
	for _, x := range extra {
		add(x)
	}
	seen := map[string]bool{}
	for _, w := range writable {
		repo := repoOf(w)
		if repo.top == "" || seen[repo.top] {
			continue
		}
		seen[repo.top] = true
		if repo.dotGitIsDir {
			pr.pinned = appendNew(pr.pinned, filepath.Join(repo.top, ".git"))
		} else {
			// A .git file names the repository's folder: rewritten, it
			// would lead git to hooks of the runner's.
			add(filepath.Join(repo.top, ".git"))
		}
		for _, p := range repo.protected(home) {
			add(p)
		}
	}
	return pr
}

// repo is a git repository as found from a path inside it.
type repo struct {
	top         string // the working tree's top, which holds .git
	dotGitIsDir bool
	gitDir      string // where HEAD and the index are (.git, or a linked worktree's)
	commonDir   string // where config, hooks and modules are
}

// repoOf finds the repository path lies in: the nearest .git at or above
// it.
func repoOf(path string) repo {
	for dir := path; ; dir = filepath.Dir(dir) {
		dotGit := filepath.Join(dir, ".git")
		if st, err := os.Lstat(dotGit); err == nil {
			r := repo{top: dir}
			switch {
			case st.IsDir():
				r.dotGitIsDir, r.gitDir = true, dotGit
			case st.Mode().IsRegular():
				r.gitDir = gitDirOf(dotGit, dir)
			}
			r.commonDir = r.gitDir
			if r.gitDir != "" {
				if data, err := os.ReadFile(filepath.Join(r.gitDir, "commondir")); err == nil {
					c := strings.TrimSpace(string(data))
					if !filepath.IsAbs(c) {
						c = filepath.Join(r.gitDir, c)
					}
					r.commonDir = filepath.Clean(c)
				}
			}
			return r
		}
		if dir == "/" || dir == "." {
			return repo{}
		}
	}
}

// gitDirOf reads a .git file ("gitdir: PATH").
func gitDirOf(file, top string) string {
	data, err := os.ReadFile(file)
	if err != nil || len(data) > 4096 {
		return ""
	}
	d, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return ""
	}
	d = strings.TrimSpace(d)
	if !filepath.IsAbs(d) {
		d = filepath.Join(top, d)
	}
	return filepath.Clean(d)
}

// protected are the paths of r that run code or configure git: hooks/ and
// config (config.worktree too), the same in each submodule's repository
// beneath modules/, and the folder core.hooksPath names.
func (r repo) protected(home string) []string {
	if r.commonDir == "" {
		return nil
	}
	var out []string
	for _, d := range appendNew([]string{r.commonDir}, r.gitDir) {
		out = append(out, filepath.Join(d, "hooks"), filepath.Join(d, "config"), filepath.Join(d, "config.worktree"))
	}
	n := 0
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if depth > maxModuleDepth || n >= maxModules {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() || n >= maxModules {
				continue
			}
			n++
			sub := filepath.Join(dir, e.Name())
			// A submodule's name may hold slashes: its repository is
			// the folder with a HEAD, wherever beneath modules/.
			if _, err := os.Lstat(filepath.Join(sub, "HEAD")); err == nil {
				out = append(out, filepath.Join(sub, "hooks"), filepath.Join(sub, "config"), filepath.Join(sub, "config.worktree"))
				walk(filepath.Join(sub, "modules"), depth+1)
				continue
			}
			walk(sub, depth+1)
		}
	}
	walk(filepath.Join(r.commonDir, "modules"), 0)
	for _, cfg := range []string{filepath.Join(r.commonDir, "config"), filepath.Join(home, ".gitconfig")} {
		if home == "" && !strings.HasPrefix(cfg, r.commonDir) {
			continue
		}
		if hp := hooksPath(cfg); hp != "" {
			switch {
			case strings.HasPrefix(hp, "~/") && home != "":
				hp = filepath.Join(home, hp[2:])
			case !filepath.IsAbs(hp):
				hp = filepath.Join(r.top, hp) // hooks run at the working tree's top
			}
			out = append(out, filepath.Clean(hp))
		}
	}
	return out
}

// hooksPath reads core.hooksPath from a git config file: the plain form
// git writes ("[core]" then "hooksPath = VALUE"), the last one winning, as
// in git. Includes are not followed.
func hooksPath(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	var value string
	core := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section := strings.ToLower(strings.Trim(strings.Fields(line + " ")[0], "[]"))
			core = section == "core"
			if i := strings.Index(line, "]"); i > 0 && core {
				line = strings.TrimSpace(line[i+1:]) // "[core] hooksPath = x"
			} else {
				continue
			}
		}
		if !core {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "hookspath") {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.IndexAny(v, "#;"); i >= 0 && !strings.HasPrefix(v, "\"") {
			v = strings.TrimSpace(v[:i])
		}
		value = strings.Trim(v, "\"")
	}
	return value
}
