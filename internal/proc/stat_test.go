package proc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// statLine builds a realistic /proc/PID/stat line around comm.
func statLine(pid int, comm string, state byte, ppid, pgid, sid int, start uint64) string {
	// Fields 7..21 are filler here; 22 is starttime; a few trailing fields follow.
	return fmt.Sprintf("%d (%s) %c %d %d %d 34816 %d 4194560 1234 0 0 0 10 3 0 0 20 0 1 0 %d 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
		pid, comm, state, ppid, pgid, sid, pgid, start)
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		comm string
	}{
		{"plain", "sleep"},
		{"space", "my prog"},
		{"closing paren", "a)b"},
		{"paren and state-like text", "x) R 1 1 1 (y"},
		{"trailing paren space", ") "},
		{"only parens", "()"},
		{"newline", "two\nlines"},
		{"empty", ""},
		{"numbers", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(statLine(4242, tt.comm, 'S', 17, 4242, 11, 987654)))
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			want := Stat{PID: 4242, Comm: tt.comm, State: 'S', PPID: 17, PGID: 4242, SID: 11, Threads: 1, StartTime: 987654}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseStatRejectsMalformed(t *testing.T) {
	for _, line := range []string{
		"",
		"12",
		"12 (comm",
		"abc (comm) S 1 1 1",
		"12 (comm) S 1 1 1", // too short
		"-3 (comm) S 1 1 1" + strings.Repeat(" 0", 20),  // negative pid
		"12 (comm) SS 1 1 1" + strings.Repeat(" 0", 20), // state must be one char
		"12 (comm) S x 1 1" + strings.Repeat(" 0", 20),
		strings.Replace(statLine(1, "c", 'S', 0, 0, 0, 5), " 5 ", " notanumber ", 1),
	} {
		if st, err := ParseStat([]byte(line)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want error", line, st)
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) error %v does not wrap ErrMalformed", line, err)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.StartTime == 0 {
		t.Fatalf("ReadStat(self) = %+v", st)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadStat(missing) error = %v, want ErrNotExist", err)
	}
}

func TestStoppedAndZombie(t *testing.T) {
	for state, want := range map[byte][2]bool{'T': {true, false}, 't': {true, false}, 'Z': {false, true}, 'X': {false, true}, 'S': {false, false}, 'R': {false, false}} {
		st := Stat{State: state}
		if st.Stopped() != want[0] || st.Zombie() != want[1] {
			t.Errorf("state %c: Stopped %v Zombie %v, want %v", state, st.Stopped(), st.Zombie(), want)
		}
	}
}

// FuzzParseStat checks invariants on hostile comm values and whole lines:
// never panic; whatever comm a process chooses, the fields after it are
// read exactly.
func FuzzParseStat(f *testing.F) {
	for _, seed := range []string{"sleep", "a)b", ") S 1 2 3", "(", ")", "x\n)", " ", "(((", ")))"} {
		f.Add(seed, []byte(statLine(7, seed, 'R', 1, 7, 7, 42)))
	}
	f.Fuzz(func(t *testing.T, comm string, raw []byte) {
		_, _ = ParseStat(raw) // any input: no panic
		if len(comm) > 64 {
			return
		}
		st, err := ParseStat([]byte(statLine(99, comm, 'T', 5, 6, 7, 123456789)))
		if err != nil {
			t.Fatalf("comm %q: %v", comm, err)
		}
		if st.PID != 99 || st.Comm != comm || st.State != 'T' || st.PPID != 5 || st.PGID != 6 || st.SID != 7 || st.StartTime != 123456789 {
			t.Fatalf("comm %q: parsed %+v", comm, st)
		}
	})
}
