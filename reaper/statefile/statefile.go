package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corral-sh/corral/reaper"
	"golang.org/x/sys/unix"
)

// Document is the state file's content: the engine's document (its keys
// and their order are defined there). Writer satisfies reaper.StateWriter.
type Document = reaper.Document

// timeLayout pins six fractional digits: time.RFC3339Nano would drop trailing
// zeros and give the field a varying width.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// warnPrefix is what the tests in test/, and anyone grepping logs, look for.
const warnPrefix = "corral: process state unavailable: "

// maxCreateAttempts bounds the retries on a taken temp name. A collision is
// expected only from a leftover of an earlier corral that died mid-write with
// the same pid, which is routine in a pid namespace where corral is always 1.
const maxCreateAttempts = 16

// tempCounter makes temp names unique within the process, across Writers.
var tempCounter atomic.Uint64

var errClosed = errors.New("state writer closed")

// Writer writes Documents to one path atomically.
//
// A Writer is used from one goroutine only; it does no locking. The zero of
// its pointer type (nil) and the Writer returned by Open("") accept every call
// and do nothing, so callers need no checks for "no --state given".
type Writer struct {
	dirfd  int    // directory handle, -1 when there is none
	dir    string // only for messages: the directory as named at Open
	base   string // name of the state file inside the directory
	err    error  // why Open failed, reported by the first Write
	warn   io.Writer
	warned bool
	noop   bool
	now    func() time.Time
}

// Open prepares a Writer for path. It never fails: a failure is remembered
// and reported by the first Write, so the caller's start-up path stays the
// same whether or not the state file is usable.
//
// The directory of path is resolved now, following symlinks as they are at
// this moment, and held open for the Writer's life. An empty path gives a
// Writer that does nothing. warn receives the single failure line; nil
// discards it.
func Open(path string, warn io.Writer) *Writer {
	if warn == nil {
		warn = io.Discard
	}
	w := &Writer{dirfd: -1, warn: warn, now: time.Now}
	if path == "" {
		w.noop = true
		return w
	}
	w.dir, w.base = filepath.Split(path)
	if w.dir == "" {
		w.dir = "."
	}
	// Split leaves the base empty for "dir/"; "." and ".." would name a
	// directory, not a file that can be renamed over.
	if w.base == "" || w.base == "." || w.base == ".." {
		w.err = fmt.Errorf("%q does not name a file", path)
		return w
	}
	// O_PATH: the handle is only ever used as the dirfd of *at calls, which
	// needs search permission on the folder but not read permission.
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(w.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		w.err = &os.PathError{Op: "open", Path: w.dir, Err: err}
		return w
	}
	w.dirfd = fd
	return w
}

// Write stamps doc.UpdatedAt with the current UTC time and replaces the state
// file with doc. The first failure in the Writer's life is reported as one
// line on the warning stream; every failure is also returned, for callers
// and tests that care.
func (w *Writer) Write(doc Document) error {
	if w == nil || w.noop {
		return nil
	}
	if w.err != nil {
		return w.fail(w.err)
	}
	if w.dirfd < 0 {
		return w.fail(errClosed)
	}
	doc.UpdatedAt = w.now().UTC().Format(timeLayout)
	data, err := json.Marshal(doc)
	if err != nil {
		return w.fail(err)
	}
	return w.fail(w.replace(append(data, '\n')))
}

// Close releases the directory handle. Later Writes fail (and warn once).
func (w *Writer) Close() error {
	if w == nil || w.dirfd < 0 {
		return nil
	}
	fd := w.dirfd
	w.dirfd = -1
	return unix.Close(fd)
}

// replace writes data to a new temp file in the held directory and renames
// it over the target. Every step is relative to the directory handle, so no
// path is resolved again after Open.
func (w *Writer) replace(data []byte) error {
	f, tmp, err := w.createTemp()
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		// The umask applies to openat's mode and may strip the owner's
		// bits; fchmod does not consult it.
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// renameat replaces whatever the target name holds, a planted
		// symlink included, without following it.
		err = renameat(w.dirfd, tmp, w.base)
		if err != nil {
			err = fmt.Errorf("rename %s to %s: %w", w.path(tmp), w.path(w.base), err)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(w.dirfd, tmp, 0)
	}
	return err
}

// createTemp opens a fresh file beside the target. O_EXCL|O_NOFOLLOW refuse
// anything that is already there, so a name the runner predicted and planted
// (file or symlink) is skipped rather than written through.
func (w *Writer) createTemp() (*os.File, string, error) {
	pid := os.Getpid()
	var err error
	for range maxCreateAttempts {
		tmp := tempName(w.base, pid, tempCounter.Add(1))
		var fd int
		fd, err = retryEINTR(func() (int, error) {
			return unix.Openat(w.dirfd, tmp,
				unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		})
		if err == nil {
			return os.NewFile(uintptr(fd), w.path(tmp)), tmp, nil
		}
		if err != unix.EEXIST {
			return nil, "", &os.PathError{Op: "create", Path: w.path(tmp), Err: err}
		}
	}
	return nil, "", fmt.Errorf("create temp file in %s: %w", w.dir, err)
}

// fail reports err once per Writer and returns it unchanged.
func (w *Writer) fail(err error) error {
	if err == nil || w.warned {
		return err
	}
	w.warned = true
	// The line must stay one line for anyone counting them.
	reason := strings.NewReplacer("\n", " ", "\r", " ").Replace(err.Error())
	_, _ = io.WriteString(w.warn, warnPrefix+reason+"\n")
	return err
}

// path names a file in the directory for messages only; it is never opened.
func (w *Writer) path(name string) string { return filepath.Join(w.dir, name) }

// tempName is hidden (leading dot) so globs over the folder skip it, and
// keeps the target's name first so a leftover says what it belonged to.
// The target's name is cut so the result stays within NAME_MAX.
func tempName(base string, pid int, n uint64) string {
	const keep = 200
	if len(base) > keep {
		base = base[:keep]
	}
	return fmt.Sprintf(".%s.%d.%d.tmp", base, pid, n)
}

func renameat(dirfd int, from, to string) error {
	_, err := retryEINTR(func() (int, error) {
		return 0, unix.Renameat(dirfd, from, dirfd, to)
	})
	return err
}

// retryEINTR repeats fn while it is interrupted. Go installs its signal
// handlers with SA_RESTART, but some filesystems (FUSE, NFS) still return
// EINTR, and corral's signal traffic is heavy by design.
func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}
