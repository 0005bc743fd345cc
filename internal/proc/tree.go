package proc

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"sync"
	"unsafe"

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
	kids, err := System().Children(pid)
	if err != nil {
		return nil, err
	}
	return StatsOf(pid, kids, nil)
}

// StatsOf reads the stat of each of kids, listed as children of parent,
// appended to out, and leaves out those that have gone or no longer are
// parent's children (a pid reused since it was listed). An error means
// the list is not complete.
func StatsOf(parent int, kids []int, out []Stat) ([]Stat, error) {
	for _, k := range kids {
		st, err := ReadStat(k)
		if err != nil && Blinding(err) {
			return out, err
		}
		if err != nil || st.PPID != parent {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// ForkingThread finds the thread of pid whose children file lists child:
// the thread that forked it (a child is listed under the thread that
// forked it until that thread exits). ok is false when no thread lists it
// (it has gone, or its parent thread exited and it moved to another).
func ForkingThread(pid, child int) (tid int, ok bool) {
	tasks, err := readDirNames("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0, false
	}
	for _, name := range tasks {
		t, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		kids, err := liveSource{}.threadChildren(pid, t)
		if err == nil && slices.Contains(kids, child) {
			return t, true
		}
	}
	return 0, false
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
func (c *ChildrenFile) Read() ([]int, error) { return c.AppendTo(nil) }

// AppendTo appends the pids the file lists now to kids, with no new
// descriptor.
func (c *ChildrenFile) AppendTo(kids []int) ([]int, error) {
	n := 0
	for {
		if n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		// A raw system call: a read of a /proc seq file does not block,
		// and the Go runtime's entry into a system call would wake its
		// monitor thread on every idle tick of the engine.
		m, err := rawPread(c.fd, c.buf[n:], n)
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
	for _, f := range bytes.Fields(c.buf[:n]) {
		if v, ok := atoi(f); ok {
			kids = append(kids, v)
		}
	}
	return kids, nil
}

// Close closes the file.
func (c *ChildrenFile) Close() error { return unix.Close(c.fd) }

// rawPread is pread(2) without the Go runtime's system call entry, on
// 64-bit platforms (where the offset is one argument).
func rawPread(fd int, buf []byte, off int) (int, error) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		return unix.Pread(fd, buf, int64(off))
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(off), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
