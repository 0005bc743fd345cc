package plan

import (
	"path/filepath"
	"strings"
)

// Protected paths beneath a writable one (SPEC, "Protected paths beneath a
// writable one"): files that run code the next time the user, outside any
// sandbox, uses the folder. The list is plain data, computed here from
// facts the host side gathered before launch (ProtectFacts: which
// repository each writable path lies in, its core.hooksPath, $HOME), so
// that --help, `corral probe` and -v can name it, and each mode enforce
// it: read-only mounts in namespace modes (package runner, mounts.go),
// the engine's checker making every write-intent call beneath a writable
// path itself in subreaper mode (sandbox/internal/sockcheck, fswrite.go).

// TopNames are protected at each writable path's top, and at $HOME's
// when $HOME is that path or lies beneath it; a name ending in "/" is a
// folder, protected with everything beneath it.
var TopNames = []string{
	".gitmodules", ".bashrc", ".bash_profile", ".bash_login", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".envrc",
	".vscode/", ".idea/", ".husky/",
	".mcp.json", ".claude/settings*.json", ".gemini/settings.json", ".codex/config.toml",
}

// RepoNames are protected in the repository a writable path lies in (or
// whose .git lies at its top), relative to its git folder; .git itself
// cannot be renamed, removed or replaced.
var RepoNames = []string{"hooks/", "config", "modules/*/hooks/", "modules/*/config", "the folder core.hooksPath names"}

// ProtectFacts are what the host side found on the filesystem before
// launch; every path absolute and canonical (symlinks followed).
type ProtectFacts struct {
	// Writable are the --writable paths, canonical.
	Writable []string
	// Homes are $HOME (the caller's and the runner's, when they differ).
	Homes []string
	// Settings are the settings files read for this run.
	Settings []string
	// Repos are the repositories the writable paths lie in.
	Repos []RepoFacts
	// Links are the protected names at a writable path's top that are
	// symlinks, with what they lead to: the file the user's tools read.
	Links map[string]string
}

// RepoFacts is one git repository as found from a writable path.
type RepoFacts struct {
	Top       string // the working tree's top, which holds .git
	DotGitDir bool   // .git is a folder (not a file naming one)
	GitDir    string // where HEAD and the index are
	CommonDir string // where config, hooks and modules are
	HooksPath string // core.hooksPath, absolute; "": none
}

// Protection is the protected-path list of a run: what the engine's
// checker holds the runner's write-intent calls to, beside the writable
// paths.
type Protection struct {
	// Writable are the --writable paths, canonical (as the kernel names
	// a resolved file), which the checker compares.
	Writable []string
	// Paths are protected with everything beneath them.
	Paths []string
	// Patterns are protected paths named by a pattern (filepath.Match,
	// "*" within one name): .claude/settings*.json.
	Patterns []string
	// Pinned are the .git folders: never renamed, removed or replaced.
	Pinned []string
	// Modules are the repositories' modules/ folders, beneath which
	// each submodule's hooks/ and config are protected.
	Modules []string
}

// Protect computes the protected paths for the writable paths (canonical)
// from f. A writable path that is itself a protected path, or lies beneath
// one, is an explicit re-grant: it gets no list of its own, and what lies
// beneath it is writable (the checker's WritePolicy.Protects).
func Protect(writable []string, f ProtectFacts) Protection {
	var pr Protection
	add := func(list *[]string, p string) {
		for _, q := range *list {
			if q == p {
				return
			}
		}
		*list = append(*list, filepath.Clean(p))
	}
	lists := func(w string) Protection {
		var one Protection
		tops := []string{w}
		for _, h := range f.Homes {
			if h != w && beneathPath(h, w) {
				tops = append(tops, h)
			}
		}
		for _, top := range tops {
			for _, n := range TopNames {
				n = strings.TrimSuffix(n, "/")
				if strings.ContainsAny(n, "*?[") {
					add(&one.Patterns, escapeGlob(top)+"/"+n)
					continue
				}
				p := filepath.Join(top, n)
				add(&one.Paths, p)
				if t, ok := f.Links[p]; ok {
					add(&one.Paths, t)
				}
			}
		}
		for _, r := range f.Repos {
			if !beneathPath(w, r.Top) && !beneathPath(r.Top, w) {
				continue
			}
			dotGit := filepath.Join(r.Top, ".git")
			if r.DotGitDir {
				add(&one.Pinned, dotGit)
			} else {
				add(&one.Paths, dotGit) // a .git file names the repository
			}
			for _, d := range []string{r.CommonDir, r.GitDir} {
				if d == "" {
					continue
				}
				add(&one.Paths, filepath.Join(d, "hooks"))
				add(&one.Paths, filepath.Join(d, "config"))
				add(&one.Paths, filepath.Join(d, "config.worktree"))
			}
			if r.CommonDir != "" {
				add(&one.Modules, filepath.Join(r.CommonDir, "modules"))
			}
			if r.HooksPath != "" {
				add(&one.Paths, r.HooksPath)
			}
		}
		return one
	}
	per := make([]Protection, len(writable))
	for i, w := range writable {
		per[i] = lists(w)
	}
	for i, w := range writable {
		regrant := false
		for j := range writable {
			if j != i && per[j].covers(w) {
				regrant = true
			}
		}
		if regrant {
			continue
		}
		for _, p := range per[i].Paths {
			add(&pr.Paths, p)
		}
		for _, p := range per[i].Patterns {
			add(&pr.Patterns, p)
		}
		for _, p := range per[i].Pinned {
			add(&pr.Pinned, p)
		}
		for _, p := range per[i].Modules {
			add(&pr.Modules, p)
		}
	}
	for _, s := range f.Settings {
		for _, w := range writable {
			if beneathPath(s, w) {
				add(&pr.Paths, s)
			}
		}
	}
	return pr
}

// covers reports whether path is one of p's protected paths or lies
// beneath one.
func (p Protection) covers(path string) bool {
	for _, e := range p.Paths {
		if beneathPath(path, e) {
			return true
		}
	}
	for _, pat := range p.Patterns {
		if ok, _ := filepath.Match(pat, path); ok {
			return true
		}
	}
	return false
}

// Empty reports whether nothing is protected.
func (p Protection) Empty() bool {
	return len(p.Paths) == 0 && len(p.Patterns) == 0 && len(p.Pinned) == 0 && len(p.Modules) == 0
}

func beneathPath(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// escapeGlob makes a path match itself in filepath.Match.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// DescribeProtection is --help's and `corral probe`'s account of the
// protected paths, one line each.
func DescribeProtection() []string {
	return []string{
		"at each --writable path's top (and $HOME's, when it lies beneath one): " + strings.Join(TopNames, " ") + ", and the --settings file read",
		"in the git repository it lies in: .git itself cannot be renamed, removed or replaced; read-only beneath it: " + strings.Join(RepoNames, ", "),
		"a --writable path naming one of them (or a path beneath it) re-grants that path alone",
	}
}
