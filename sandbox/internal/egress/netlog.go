package egress

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// logTimeLayout is RFC 3339 in UTC with a fixed six-digit fraction, the
// state file's layout, so every line's time has the same width.
const logTimeLayout = "2006-01-02T15:04:05.000000Z"

// Log is the connection log (--net-log): JSON lines, a DecisionLine for
// every attempt and an EndLine for every allowed one. Safe for concurrent
// use. A nil *Log accepts every call
// and writes nothing.
//
// The log is observability, never control: a failed write is reported once
// on the warning stream for the whole run and never changes what the proxy
// does.
type Log struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	warned bool
	nextID uint64 // the last id given; ids start at 1 per Log (per run)
	// run names this run on every line: ids start at 1 per run, and runs
	// may share one log file (a CI runner's jobs, an agent's sessions).
	run string
}

// Via says how a connection went out, on each line of the log.
const (
	ViaProxy  = "proxy"  // through the egress proxy (HTTP or SOCKS5)
	ViaDirect = "direct" // a connect past the proxy: checked by the engine, or a --host-port/--publish forward
	ViaDNS    = "dns"    // a lookup answered (or refused) by corral
)

// OpenLog opens path for appending, creating it with mode 0600. It refuses
// a symlink at path (O_NOFOLLOW) and anything but a regular file, so a runner
// that can write to the folder cannot redirect the log or block corral on a
// FIFO.
//
// Call it once at start, before the runner exists: the file stays open for
// the whole run and is never opened by name again, so later changes to the
// folder cannot redirect the writes. (The state file holds a directory handle
// because it renames a fresh file on every write; the log only appends to
// the one file it opened.)
func OpenLog(path string) (*Log, error) {
	if path == "" {
		return nil, fmt.Errorf("--net-log: empty path")
	}
	const flags = unix.O_WRONLY | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	created := true
	fd, err := openRetry(path, flags|unix.O_CREAT|unix.O_EXCL)
	if err == unix.EEXIST {
		created = false
		fd, err = openRetry(path, flags)
	}
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("--net-log %s: is a symbolic link; corral does not follow one there, give the real path", path)
		}
		return nil, fmt.Errorf("--net-log %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("--net-log %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("--net-log %s: not a regular file", path)
	}
	if created {
		// The umask applies to open's mode; fchmod does not consult it.
		if err := unix.Fchmod(fd, 0o600); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("--net-log %s: %w", path, err)
		}
	}
	// O_NONBLOCK only guarded the open against a FIFO; a regular file
	// ignores it, but clear it so the descriptor is plain.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("--net-log %s: %w", path, err)
	}
	run, err := newRunID()
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("--net-log %s: an id for this run: %w", path, err)
	}
	return &Log{f: os.NewFile(uintptr(fd), path), path: path, run: run}, nil
}

// newRunID is 12 random hex digits: enough that runs sharing a log file
// never meet, from the same source as the proxy's credentials.
func newRunID() (string, error) {
	var b [6]byte
	if err := getrandom(b[:]); err != nil {
		if uerr := urandom(b[:]); uerr != nil {
			return "", fmt.Errorf("getrandom(2): %v; /dev/urandom: %v", err, uerr)
		}
	}
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, hexDigits[c>>4], hexDigits[c&15])
	}
	return string(out), nil
}

// Run is the id this log gives the run on each line ("" for a nil Log).
func (l *Log) Run() string {
	if l == nil {
		return ""
	}
	return l.run
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0o600)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Close closes the file. Later writes are dropped silently.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// DecisionLine is the first line of a connection attempt in the log,
// written when the proxy has decided (and, for an allowed one, dialled).
// The field names and order are part of the contract.
type DecisionLine struct {
	Time     string `json:"time"`
	ID       uint64 `json:"id"`
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Address  string `json:"address"`
	Decision string `json:"decision"` // allow, deny, or challenge
	Reason   string `json:"reason"`
	Run      string `json:"run"`
	Via      string `json:"via"` // ViaProxy, ViaDirect, ViaDNS
	// LeftOut counts the rate-limited refusals not logged since the last
	// line that carried a count (only on such refusals, and only when not
	// zero).
	LeftOut int `json:"left_out,omitempty"`
}

// EndLine is the last line of an allowed attempt, written when it closes.
type EndLine struct {
	Time       string `json:"time"`
	ID         uint64 `json:"id"`
	Event      string `json:"event"` // "end"
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	DurationMS int64  `json:"duration_ms"`
	Run        string `json:"run"`
	Via        string `json:"via"`
}

// decision gives d the next id and the time now, and appends it. The id
// and the time are taken under the lock that orders the writes, so ids
// increase and times never go back down the file. It returns the id (0 on
// a nil Log).
func (l *Log) decision(d *DecisionLine, warn io.Writer) uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextID++
	d.ID = l.nextID
	d.Time = logTime(time.Now())
	d.Run = l.run
	if d.Via == "" {
		d.Via = ViaProxy
	}
	l.writeLocked(d, warn)
	return d.ID
}

// end appends the end line of attempt id, which went out via via.
func (l *Log) end(id uint64, via string, up, down int64, dur time.Duration, warn io.Writer) {
	if l == nil || id == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if via == "" {
		via = ViaProxy
	}
	l.writeLocked(&EndLine{Time: logTime(time.Now()), ID: id, Event: "end",
		BytesUp: up, BytesDown: down, DurationMS: dur.Milliseconds(), Run: l.run, Via: via}, warn)
}

// writeLocked appends v as one line with one write(2), never buffered:
// O_APPEND keeps concurrent writers' lines whole, and a corral killed right
// after loses nothing written before. A failure is reported on warn once
// per Log. l.mu is held.
func (l *Log) writeLocked(v any, warn io.Writer) {
	if l.f == nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return // cannot happen: strings and integers only
	}
	data = append(data, '\n')
	if _, err := l.f.Write(data); err != nil && !l.warned {
		l.warned = true
		if warn != nil {
			fmt.Fprintf(warn, "corral: network: cannot write --net-log %s (no more warnings): %v\n", l.path, unwrapPath(err))
		}
	}
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func logTime(t time.Time) string { return t.UTC().Format(logTimeLayout) }

// FSLine is a write the sandbox's filesystem rules refused (SPEC,
// "Refusals are named"): path as corral names it (escaped: it came from
// the runner), op the system call, reason why the policy refused it.
type FSLine struct {
	Time   string `json:"time"`
	Event  string `json:"event"` // "fs"
	Path   string `json:"path"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
	Run    string `json:"run"`
}

// FS appends the line of one refused write, at once.
func (l *Log) FS(path, op, reason string, warn io.Writer) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writeLocked(&FSLine{Time: logTime(time.Now()), Event: "fs", Path: path, Op: op, Reason: reason, Run: l.run}, warn)
}
