package proc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Stat is the subset of /proc/PID/stat the engine relies on.
type Stat struct {
	PID       int
	Comm      string
	State     byte // R, S, D, Z, T, t, X, ...
	PPID      int
	PGID      int
	SID       int
	Threads   int    // num_threads: 1 lets a walk read the one children file without listing task/
	StartTime uint64 // clock ticks after boot: with PID, a process's identity
}

// Stopped reports whether the process is stopped by a signal or a tracer,
// and so will not act on SIGTERM until it gets SIGCONT.
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// Zombie reports whether the process has exited and awaits its reaper.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ErrMalformed is wrapped by ParseStat for a line it cannot trust.
var ErrMalformed = errors.New("malformed /proc stat line")

// ParseStat parses one /proc/PID/stat line.
//
// comm (field 2) is chosen by the process and may contain spaces, parentheses
// and even newlines, so the fields are found after the *last* ')' in the
// line, never by splitting the whole line on spaces.
func ParseStat(line []byte) (Stat, error) {
	open := bytes.IndexByte(line, '(')
	closing := bytes.LastIndexByte(line, ')')
	if open < 1 || closing < open {
		return Stat{}, fmt.Errorf("%w: no (comm)", ErrMalformed)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil || pid <= 0 {
		return Stat{}, fmt.Errorf("%w: pid %q", ErrMalformed, line[:open])
	}
	// After ") ": state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8)
	// flags(9) minflt(10) cminflt(11) majflt(12) cmajflt(13) utime(14)
	// stime(15) cutime(16) cstime(17) priority(18) nice(19)
	// num_threads(20) itrealvalue(21) starttime(22) ...
	// Only the first 20 fields after comm are split, without allocating.
	const startTimeIndex = 22 - 3
	var fields [startTimeIndex + 1][]byte
	nf := 0
	rest := line[closing+1:]
	for nf <= startTimeIndex {
		i := 0
		for i < len(rest) && isSpace(rest[i]) {
			i++
		}
		if i == len(rest) {
			break
		}
		j := i
		for j < len(rest) && !isSpace(rest[j]) {
			j++
		}
		fields[nf] = rest[i:j]
		nf++
		rest = rest[j:]
	}
	if nf <= startTimeIndex || len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: %d fields after comm", ErrMalformed, nf)
	}
	s := Stat{PID: pid, Comm: string(line[open+1 : closing]), State: fields[0][0]}
	ints := []*int{&s.PPID, &s.PGID, &s.SID}
	for i, dst := range ints {
		v, ok := atoi(fields[1+i])
		if !ok {
			return Stat{}, fmt.Errorf("%w: field %d %q", ErrMalformed, 4+i, fields[1+i])
		}
		*dst = v
	}
	if v, ok := atoi(fields[20-3]); ok {
		s.Threads = v
	}
	start, ok := atoi(fields[startTimeIndex])
	if !ok {
		return Stat{}, fmt.Errorf("%w: starttime %q", ErrMalformed, fields[startTimeIndex])
	}
	s.StartTime = uint64(start)
	return s, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// atoi parses a non-negative decimal without allocating.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// ReadStat reads and parses /proc/PID/stat. A process that is gone yields
// an error wrapping os.ErrNotExist (or syscall.ESRCH).
func ReadStat(pid int) (Stat, error) {
	var buf [512]byte
	data, err := readFile(statPath(pid), buf[:])
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}
