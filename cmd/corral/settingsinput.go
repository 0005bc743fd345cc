//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"golang.org/x/sys/unix"
)

// A settings file is input from whoever could write it (SPEC.md,
// "Settings files"): corral reads it as such. It must be a regular file,
// opened so that nothing can make the open or a read wait (a FIFO with no
// writer blocked corral for good, and /dev/zero fed it until the machine's
// memory ran out, a signal or two held while it did), of a bounded size,
// and with every key given once.

// settingsMax is the largest settings file corral reads: far more than
// any list of options needs, and little enough that reading it is quick
// and its memory no matter.
const settingsMax = 1 << 20

// settingsDepth bounds how deep the duplicate-key walk recurses; corral's
// own format is two levels deep and sandbox-runtime's four.
const settingsDepth = 64

// readSettingsFile reads the settings file at path: a regular file of at
// most settingsMax bytes.
func readSettingsFile(path string) ([]byte, error) {
	// Asked of the path first, so that a device is never even opened
	// (opening one can have effects: a watchdog, a tape's rewind).
	var st unix.Stat_t
	if err := statRetry(path, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := regularFile(st.Mode); err != nil {
		return nil, err
	}
	// O_NONBLOCK: were the file swapped for a FIFO since, the open still
	// returns at once; fstat then refuses what was opened.
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := regularFile(st.Mode); err != nil {
		return nil, err
	}
	// One byte past the limit tells a larger file from one of exactly
	// settingsMax bytes, whatever st_size said (a file may grow, and
	// /proc's regular files say 0); st_size only sizes the first buffer.
	buf := make([]byte, 0, min(max(st.Size, 0), settingsMax)+1)
	for len(buf) <= settingsMax {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf)+4096, settingsMax+1-len(buf)))
		}
		m, err := unix.Read(fd, buf[len(buf):min(cap(buf), settingsMax+1)])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil, errors.New("reading it would block (a file whose reads wait for data is not a settings file)")
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		buf = buf[:len(buf)+m]
	}
	n := len(buf)
	if n > settingsMax {
		return nil, fmt.Errorf("larger than %d bytes (1 MiB), the limit for a settings file", settingsMax)
	}
	return buf, nil
}

func statRetry(path string, st *unix.Stat_t) error {
	for {
		if err := unix.Stat(path, st); err != unix.EINTR {
			return err
		}
	}
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// regularFile refuses every file type but a regular file, by name.
func regularFile(mode uint32) error {
	var kind string
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFIFO:
		kind = "a FIFO (a named pipe)"
	case unix.S_IFCHR:
		kind = "a character device"
	case unix.S_IFBLK:
		kind = "a block device"
	case unix.S_IFDIR:
		kind = "a directory"
	case unix.S_IFSOCK:
		kind = "a socket"
	default:
		kind = fmt.Sprintf("a file of type %#o", mode&unix.S_IFMT)
	}
	return fmt.Errorf("%s, not a regular file: a settings file must be a regular file (write the settings to one)", kind)
}

// checkDuplicateKeys refuses a key given twice in the same object, at any
// depth (objects inside lists too): encoding/json keeps the last one, so
// {"hide": ["/x"], "hide": []} would silently drop the hide.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkKeys(dec, nil, 0)
}

// keyPath is where a value lies in the document: keys and list indexes,
// joined only for an error.
type keyPath []string

func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func walkKeys(dec *json.Decoder, path keyPath, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= settingsDepth {
		return fmt.Errorf("not a settings file: nested deeper than %d", settingsDepth)
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("not a JSON object: %v", err)
			}
			key, _ := tok.(string)                       // the decoder gives only strings here
			p := append(path[:len(path):len(path)], key) // a copy: siblings share path
			if seen[key] {
				return fmt.Errorf("key %s given twice: the last one would silently win; give each key once", bounds.Quote(p.String()))
			}
			seen[key] = true
			if err := walkKeys(dec, p, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, append(path[:len(path):len(path)], "["+strconv.Itoa(i)+"]"), depth+1); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("not a JSON object: %v", err)
	}
	return nil
}

// writableOver returns the --writable path the settings file at path lies
// beneath, or "": the runner could rewrite such a file for the next run.
// Compared by inode, as Landlock's rules are, for the file and each of its
// real ancestors: a symlink, "." or a bind mount leading to the same
// directory is the same directory.
func writableOver(path string, writable []string) string {
	if len(writable) == 0 {
		return ""
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	if real, err = filepath.Abs(real); err != nil {
		return ""
	}
	type fileID struct{ dev, ino uint64 }
	ids := map[fileID]string{}
	for _, w := range writable {
		var st unix.Stat_t
		if statRetry(w, &st) == nil {
			if _, ok := ids[fileID{st.Dev, st.Ino}]; !ok {
				ids[fileID{st.Dev, st.Ino}] = w
			}
		}
	}
	for p := real; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if statRetry(p, &st) == nil {
			if w, ok := ids[fileID{st.Dev, st.Ino}]; ok {
				return w
			}
		}
		if p == "/" || p == "." {
			return ""
		}
	}
}
