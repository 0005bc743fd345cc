package sandbox

// corral changes apply: the run's changes written into DIR, each file
// whole (a new file renamed into place), never through a symlink it did
// not write: every parent is opened beneath DIR with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, and each change made at a name in
// that folder.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ApplyRefusal is apply's refusal: each path it would not write, and why.
type ApplyRefusal struct{ Reasons []string }

func (e *ApplyRefusal) Error() string {
	return fmt.Sprintf("nothing applied: %d refusal(s)", len(e.Reasons))
}

// ChangesApply writes the folder's changes into their DIRs. Refused
// (nothing written, *ApplyRefusal naming each path): device nodes, FIFOs
// and sockets always; the protected paths, a DIR changed beneath since
// the run began, and changes beneath a .git changed since, unless force.
func ChangesApply(w io.Writer, folder string, force bool) error {
	c, err := OpenChanges(folder)
	if err != nil {
		return err
	}
	all, err := c.Changes()
	if err != nil {
		return err
	}
	var refuse []string
	for i, d := range c.Run.Dirs {
		refuse = append(refuse, c.check(d, all[i], force)...)
	}
	if len(refuse) > 0 {
		return &ApplyRefusal{Reasons: refuse}
	}
	n := 0
	for i, d := range c.Run.Dirs {
		k, err := applyDir(d, all[i])
		n += k
		if err != nil {
			return fmt.Errorf("apply to %s: %v (%d change(s) written before it)", d, err, n)
		}
	}
	fmt.Fprintf(w, "corral: applied %d change(s) to %s\n", n, strings.Join(c.Run.Dirs, ", "))
	return nil
}

// check lists what apply refuses of ch in dir.
func (c *ChangesFolder) check(dir string, ch []Change, force bool) []string {
	var out []string
	gitTouched := false
	for _, x := range ch {
		if x.Kind != 'D' && !x.mode.IsDir() && !x.mode.IsRegular() && x.mode&os.ModeSymlink == 0 {
			out = append(out, fmt.Sprintf("%s: a %s; apply writes files, folders and symlinks only", x.Path, kindName(x.mode)))
			continue
		}
		if force {
			continue
		}
		if x.Protected {
			out = append(out, fmt.Sprintf("%s: a protected path (it runs code when you next use the folder); read it with corral changes show, then apply --force", x.Path))
			continue
		}
		if x.Path == ".git" || strings.HasPrefix(x.Path, ".git/") {
			gitTouched = true
		}
		fi, err := os.Lstat(filepath.Join(dir, x.Path))
		switch {
		case x.Kind == 'A' && err == nil:
			out = append(out, fmt.Sprintf("%s: created in %s since the run began; apply --force replaces it", x.Path, dir))
		case x.Kind != 'A' && err != nil:
			out = append(out, fmt.Sprintf("%s: removed from %s since the run began; apply --force writes the run's view", x.Path, dir))
		case x.Kind != 'A' && changedSince(fi, c.Run.StartNs) && !fi.IsDir():
			out = append(out, fmt.Sprintf("%s: changed in %s since the run began; apply --force overwrites it", x.Path, dir))
		}
	}
	if gitTouched && !force {
		if p := changedBeneath(filepath.Join(dir, ".git"), c.Run.StartNs); p != "" {
			out = append(out, fmt.Sprintf(".git: changed in %s since the run began (%s), and the run changed it too; apply --force, or make the run's git changes again", dir, p))
		}
	}
	return out
}

func kindName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device node"
	}
	return "special file"
}

func changedSince(fi os.FileInfo, ns int64) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Ctim.Nano() > ns
}

// changedBeneath is the first path beneath root whose ctime is after ns;
// "" for none.
func changedBeneath(root string, ns int64) string {
	found := ""
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || found != "" {
			return filepath.SkipDir
		}
		if changedSince(fi, ns) && !fi.IsDir() {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// applyDir writes ch into dir: deletions first (deepest first), then
// folders and files, parents before what lies beneath them.
func applyDir(dir string, ch []Change) (int, error) {
	root, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(root)
	var del, put []Change
	for _, x := range ch {
		if x.Kind == 'D' {
			del = append(del, x)
		} else {
			put = append(put, x)
		}
	}
	sort.Slice(del, func(i, j int) bool { return del[i].Path > del[j].Path })
	sort.Slice(put, func(i, j int) bool { return put[i].Path < put[j].Path })
	n := 0
	for _, x := range del {
		if err := atParent(root, x.Path, func(pfd int, name string) error { return removeAt(pfd, name) }); err != nil {
			return n, fmt.Errorf("remove %s: %v", x.Path, err)
		}
		n++
	}
	for _, x := range put {
		if err := atParent(root, x.Path, func(pfd int, name string) error { return putAt(pfd, name, x) }); err != nil {
			return n, fmt.Errorf("write %s: %v", x.Path, err)
		}
		n++
	}
	return n, nil
}

// atParent opens rel's parent beneath root, crossing no symlink and
// leaving root never, and calls f with it and rel's last name.
func atParent(root int, rel string, f func(pfd int, name string) error) error {
	parent, name := path.Split(rel)
	parent = strings.TrimSuffix(parent, "/")
	if parent == "" {
		parent = "."
	}
	fd, err := unix.Openat2(root, parent, &unix.OpenHow{
		Flags:   unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_RDONLY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return fmt.Errorf("%s: a symlink in the way (apply never follows one it did not write): %w", parent, err)
		}
		return err
	}
	defer unix.Close(fd)
	return f(fd, name)
}

// removeAt removes name in pfd, and what lies beneath a folder, never
// following a symlink.
func removeAt(pfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(pfd, name, 0)
	}
	fd, err := unix.Openat(pfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
}

// putAt makes name in pfd what the run left there: a folder (its mode),
// a symlink as recorded, a file whole through a new file renamed into
// place; setuid and setgid bits dropped.
func putAt(pfd int, name string, x Change) error {
	perm := uint32(x.mode.Perm())
	if x.mode&os.ModeSticky != 0 {
		perm |= unix.S_ISVTX
	}
	var st unix.Stat_t
	exists := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case x.mode.IsDir():
		if exists && !isDir {
			if err := unix.Unlinkat(pfd, name, 0); err != nil {
				return err
			}
			exists = false
		}
		if !exists {
			if err := unix.Mkdirat(pfd, name, perm); err != nil {
				return err
			}
		}
		fd, err := unix.Openat(pfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, perm)
	}
	tmp := fmt.Sprintf(".corral-apply-%d-%s", os.Getpid(), name)
	if len(tmp) > 250 {
		tmp = tmp[:250]
	}
	_ = unix.Unlinkat(pfd, tmp, 0)
	if x.mode&os.ModeSymlink != 0 {
		target, err := os.Readlink(x.upper)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, pfd, tmp); err != nil {
			return err
		}
	} else {
		if err := copyInto(pfd, tmp, x.upper, perm); err != nil {
			_ = unix.Unlinkat(pfd, tmp, 0)
			return err
		}
	}
	if isDir {
		// A folder the run replaced with a file or a link.
		if err := removeAt(pfd, name); err != nil {
			_ = unix.Unlinkat(pfd, tmp, 0)
			return err
		}
	}
	if err := unix.Renameat(pfd, tmp, pfd, name); err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return err
	}
	return nil
}

func copyInto(pfd int, tmp, src string, perm uint32) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), tmp)
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	// The run's mode, but never setuid or setgid (the umask may not
	// narrow it: fchmod, not open's mode).
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	return nil
}
