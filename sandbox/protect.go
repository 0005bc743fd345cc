package sandbox

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-sh/corral/sandbox/internal/plan"
)

// The facts the protected-path list is computed from (plan.Protect),
// gathered here on the host side before anything starts: which git
// repository each --writable path lies in, its core.hooksPath, $HOME,
// and which protected names at a writable top are symlinks.

// withProtection asks for the checked write-intent calls of a --writable
// run (plan.WithProtection).
func withProtection(run plan.Plan, settings []string) plan.Plan {
	if len(run.Privileges.Landlock.Writable) == 0 {
		return run
	}
	return run.WithProtection(protectFacts(run, settings))
}

func protectFacts(run plan.Plan, settings []string) plan.ProtectFacts {
	f := plan.ProtectFacts{Links: map[string]string{}}
	for _, s := range settings {
		if c, ok := canonical(s); ok {
			f.Settings = appendNew(f.Settings, c)
		}
	}
	for _, w := range run.Privileges.Landlock.Writable {
		if c, ok := canonical(w); ok {
			f.Writable = appendNew(f.Writable, c)
		}
	}
	homes := []string{os.Getenv("HOME")}
	for _, kv := range run.Env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			homes = append(homes, h)
		}
	}
	for _, h := range homes {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		if c, ok := canonical(h); ok {
			f.Homes = appendNew(f.Homes, c)
		}
	}
	seen := map[string]bool{}
	for _, w := range f.Writable {
		tops := []string{w}
		for _, h := range f.Homes {
			if strings.HasPrefix(h+"/", w+"/") {
				tops = append(tops, h)
			}
		}
		for _, top := range tops {
			for _, n := range plan.TopNames {
				p := filepath.Join(top, strings.TrimSuffix(n, "/"))
				if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSymlink != 0 {
					if t, ok := canonical(p); ok {
						f.Links[p] = t
					}
				}
			}
		}
		r, ok := repoOf(w)
		if !ok || seen[r.Top] {
			continue
		}
		seen[r.Top] = true
		f.Repos = append(f.Repos, r)
	}
	return f
}

func canonical(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	c, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", false
	}
	return c, true
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// repoOf finds the repository path lies in: the nearest .git at or above
// it.
func repoOf(path string) (plan.RepoFacts, bool) {
	for dir := path; ; dir = filepath.Dir(dir) {
		dotGit := filepath.Join(dir, ".git")
		st, err := os.Lstat(dotGit)
		if err != nil {
			if dir == "/" {
				return plan.RepoFacts{}, false
			}
			continue
		}
		r := plan.RepoFacts{Top: dir}
		switch {
		case st.IsDir():
			r.DotGitDir, r.GitDir = true, dotGit
		case st.Mode().IsRegular():
			r.GitDir = gitDirOf(dotGit, dir)
		}
		if r.GitDir != "" {
			if c, ok := canonical(r.GitDir); ok {
				r.GitDir = c
			}
			r.CommonDir = r.GitDir
			if data, err := os.ReadFile(filepath.Join(r.GitDir, "commondir")); err == nil && len(data) < 4096 {
				c := strings.TrimSpace(string(data))
				if !filepath.IsAbs(c) {
					c = filepath.Join(r.GitDir, c)
				}
				if cc, ok := canonical(c); ok {
					r.CommonDir = cc
				}
			}
			home := os.Getenv("HOME")
			hp := hooksPath(filepath.Join(r.CommonDir, "config"))
			if hp == "" && home != "" {
				// git reads the user's own config too; the repository's
				// wins where both say.
				hp = hooksPath(filepath.Join(home, ".gitconfig"))
			}
			if hp != "" {
				switch {
				case strings.HasPrefix(hp, "~/") && home != "":
					hp = filepath.Join(home, hp[2:])
				case !filepath.IsAbs(hp):
					hp = filepath.Join(r.Top, hp) // hooks run at the working tree's top
				}
				if c, ok := canonical(hp); ok {
					hp = c
				}
				r.HooksPath = filepath.Clean(hp)
			}
		}
		return r, true
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

// hooksPath reads core.hooksPath from a git config file, in the plain
// form git writes ("[core]" then "hooksPath = VALUE"), the last one
// winning as in git; includes are not followed. At most 1 MiB is read:
// the file is the project's, input like any other.
func hooksPath(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	var value string
	core := false
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			i := strings.Index(line, "]")
			if i < 0 {
				core = false
				continue
			}
			core = strings.EqualFold(strings.TrimSpace(line[1:i]), "core")
			line = strings.TrimSpace(line[i+1:])
		}
		if !core {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "hookspath") {
			continue
		}
		v = strings.TrimSpace(v)
		if !strings.HasPrefix(v, "\"") {
			if i := strings.IndexAny(v, "#;"); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
		}
		value = strings.Trim(v, "\"")
	}
	return value
}
