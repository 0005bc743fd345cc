package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Source answers the two questions a tree walk asks. System() reads the
// live /proc; tests and the fallback use a Table.
type Source interface {
	Children(pid int) ([]int, error)
	Stat(pid int) (Stat, error)
}

// Descendants lists the processes below root (root excluded), each parent
// before its children. Zombies are included: they still hold their pid.
//
// A child is kept only if its stat still names the parent it was found
// under: a pid that exited and was reused between the two reads, or that
// was reparented meanwhile, is left out rather than mistaken for a member
// (a reparented process shows up under its new parent on the next walk).
// Processes that vanish mid-walk are skipped, not errors.
func Descendants(src Source, root int) []Stat {
	var out []Stat
	_ = walk(src, root, func(pid, parent int) (Stat, bool) {
		st, err := src.Stat(pid)
		if err != nil || st.PPID != parent {
			return st, false
		}
		out = append(out, st)
		return st, true
	})
	return out
}

// walk visits each process below root once, breadth first. visit is given
// a pid listed as a child of parent; it returns the child's stat and
// whether it really is parent's child, and only then is it walked.
//
// It returns the first error that means the walk could not see part of
// the tree: a children list that could not be read for another reason
// than its process having gone (EMFILE when the descriptors run out).
func walk(src Source, root int, visit func(pid, parent int) (Stat, bool)) error {
	queue := []Stat{{PID: root}}
	seen := map[int]bool{root: true}
	var firstErr error
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		var kids []int
		var err error
		if live, ok := src.(liveSource); ok && parent.Threads == 1 {
			// One thread: its children file is the whole list, and
			// listing task/ would double the reads of a walk.
			kids, err = live.threadChildren(parent.PID, parent.PID)
		} else {
			kids, err = src.Children(parent.PID)
		}
		if err != nil {
			if firstErr == nil && Blinding(err) {
				firstErr = err
			}
			continue
		}
		for _, pid := range kids {
			if seen[pid] {
				continue
			}
			if st, ok := visit(pid, parent.PID); ok {
				seen[pid] = true
				queue = append(queue, st)
			}
		}
	}
	return firstErr
}

// Blinding reports whether err means /proc could not be read because
// corral ran out of something (descriptors, memory), not because the
// process read has gone: the tree is then not fully seen.
func Blinding(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM)
}

// Table is a Source over a fixed snapshot of stat records.
type Table map[int]Stat

// Children implements Source.
func (t Table) Children(pid int) ([]int, error) {
	var kids []int
	for child, st := range t {
		if st.PPID == pid && child != pid {
			kids = append(kids, child)
		}
	}
	return kids, nil
}

// ScanAll reads every process in /proc into a Table. It costs one read per
// process on the host, so the engine uses it only where the kernel lacks
// /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
func ScanAll() (Table, error) {
	names, err := readDirNames("/proc")
	if err != nil {
		return nil, err
	}
	t := make(Table, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil {
			t[pid] = st
		}
	}
	return t, nil
}

// System returns the Source for the live /proc: children come from
// /proc/PID/task/TID/children, so a walk costs in proportion to the tree
// walked, not to the number of processes on the host.
func System() Source {
	childrenFilesOnce.Do(func() {
		_, err := os.Stat("/proc/thread-self/children")
		childrenFiles = err == nil
	})
	if childrenFiles {
		return liveSource{}
	}
	return scanningSource{}
}

var (
	childrenFilesOnce sync.Once
	childrenFiles     bool
)

type liveSource struct{}

// Children reads the children files of every thread of pid: a child is
// listed under the thread that forked it, or, for an adopted orphan, under
// the thread the kernel picked as its new parent.
func (s liveSource) Children(pid int) ([]int, error) {
	tasks, err := readDirNames("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, name := range tasks {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		k, err := s.threadChildren(pid, tid)
		if err != nil {
			if Blinding(err) {
				return kids, err
			}
			continue // the thread exited meanwhile
		}
		kids = append(kids, k...)
	}
	return kids, nil
}

// threadChildren reads one thread's children file.
func (liveSource) threadChildren(pid, tid int) ([]int, error) {
	var buf [512]byte
	data, err := readFile(childrenPath(pid, tid), buf[:])
	if err != nil {
		return nil, err
	}
	var kids []int
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] == ' ' || i < len(data) && data[i] == '\n' {
			i++
		}
		j := i
		for j < len(data) && data[j] != ' ' && data[j] != '\n' {
			j++
		}
		if v, ok := atoi(data[i:j]); ok {
			kids = append(kids, v)
		}
		data = data[j:]
	}
	return kids, nil
}

func (liveSource) Stat(pid int) (Stat, error) { return ReadStat(pid) }

// scanningSource answers from a full /proc scan; used only without
// children files.
type scanningSource struct{}

func (scanningSource) Children(pid int) ([]int, error) {
	t, err := ScanAll()
	if err != nil {
		return nil, err
	}
	return t.Children(pid)
}

func (scanningSource) Stat(pid int) (Stat, error) { return ReadStat(pid) }

// ChildrenOf lists the direct children of pid in the live /proc. An error
// means the list is not complete.
func ChildrenOf(pid int) ([]Stat, error) {
	src := System()
	kids, err := src.Children(pid)
	if err != nil {
		return nil, err
	}
	out := make([]Stat, 0, len(kids))
	for _, k := range kids {
		st, err := src.Stat(k)
		if err != nil && Blinding(err) {
			return out, err
		}
		if err != nil || st.PPID != pid {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// ChildrenFile is one thread's children file, held open so that it can be
// read again when no new descriptor can be opened (a runner with the
// engine's uid can lower its RLIMIT_NOFILE to 3:3 with prlimit). The
// kernel regenerates a /proc seq file on each read from offset 0.
type ChildrenFile struct {
	fd  int
	buf []byte
}

// OpenChildrenFile opens /proc/PID/task/TID/children.
func OpenChildrenFile(pid, tid int) (*ChildrenFile, error) {
	fd, err := unix.Open(childrenPath(pid, tid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: childrenPath(pid, tid), Err: err}
	}
	return &ChildrenFile{fd: fd, buf: make([]byte, 4096)}, nil
}

// Read returns the pids the file lists now, with no new descriptor.
func (c *ChildrenFile) Read() ([]int, error) {
	n := 0
	for {
		if n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := unix.Pread(c.fd, c.buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	var kids []int
	for _, f := range bytes.Fields(c.buf[:n]) {
		if v, ok := atoi(f); ok {
			kids = append(kids, v)
		}
	}
	return kids, nil
}

// Close closes the file.
func (c *ChildrenFile) Close() error { return unix.Close(c.fd) }
