package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
)

// Rlimit is one resource limit for the runner.
type Rlimit struct {
	Resource int
	Soft     uint64
	Hard     uint64
}

// RlimInfinity is setrlimit(2)'s "no limit".
const RlimInfinity = math.MaxUint64

// rlimitNames are the names of the runtime spec (and of setrlimit(2)),
// with Linux's resource numbers, the same on every architecture
// (asm-generic/resource.h; rlimit_test.go holds them against x/sys/unix):
// the plan is data and makes no system call.
var rlimitNames = map[string]int{
	"RLIMIT_AS":         9,
	"RLIMIT_CORE":       4,
	"RLIMIT_CPU":        0,
	"RLIMIT_DATA":       2,
	"RLIMIT_FSIZE":      1,
	"RLIMIT_LOCKS":      10,
	"RLIMIT_MEMLOCK":    8,
	"RLIMIT_MSGQUEUE":   12,
	"RLIMIT_NICE":       13,
	"RLIMIT_NOFILE":     7,
	"RLIMIT_NPROC":      6,
	"RLIMIT_RSS":        5,
	"RLIMIT_RTPRIO":     14,
	"RLIMIT_RTTIME":     15,
	"RLIMIT_SIGPENDING": 11,
	"RLIMIT_STACK":      3,
}

// RlimitByName returns the resource number of a spec name like RLIMIT_NOFILE.
func RlimitByName(name string) (int, error) {
	r, ok := rlimitNames[strings.ToUpper(name)]
	if !ok {
		return 0, fmt.Errorf("unknown rlimit %s: want a name like RLIMIT_NOFILE or RLIMIT_NPROC", bounds.Quote(name))
	}
	return r, nil
}

func (r Rlimit) String() string {
	for name, res := range rlimitNames {
		if res == r.Resource {
			return fmt.Sprintf("%s=%s:%s", name, RlimitValue(r.Soft), RlimitValue(r.Hard))
		}
	}
	return fmt.Sprintf("rlimit %d", r.Resource)
}

// RlimitValue is v as setrlimit(2) users write it.
func RlimitValue(v uint64) string {
	if v == RlimInfinity {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// ParseRlimit parses NAME=SOFT[:HARD]; a missing HARD equals SOFT, and
// "unlimited" (or "infinity") means no limit.
func ParseRlimit(s string) (Rlimit, error) {
	name, values, ok := strings.Cut(s, "=")
	if !ok {
		return Rlimit{}, fmt.Errorf("rlimit %s: want NAME=SOFT[:HARD], e.g. RLIMIT_NOFILE=1024:4096", bounds.Quote(s))
	}
	res, err := RlimitByName(name)
	if err != nil {
		return Rlimit{}, err
	}
	softText, hardText, hasHard := strings.Cut(values, ":")
	if !hasHard {
		hardText = softText
	}
	soft, err := parseRlimitValue(softText)
	if err != nil {
		return Rlimit{}, fmt.Errorf("rlimit %s: soft: %w", bounds.Quote(s), err)
	}
	hard, err := parseRlimitValue(hardText)
	if err != nil {
		return Rlimit{}, fmt.Errorf("rlimit %s: hard: %w", bounds.Quote(s), err)
	}
	if soft > hard {
		return Rlimit{}, fmt.Errorf("rlimit %s: soft limit above hard limit", bounds.Quote(s))
	}
	return Rlimit{Resource: res, Soft: soft, Hard: hard}, nil
}

func parseRlimitValue(s string) (uint64, error) {
	switch strings.ToLower(s) {
	case "unlimited", "infinity":
		return RlimInfinity, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == math.MaxUint64 {
		return 0, fmt.Errorf("%s is not a number or \"unlimited\"", bounds.Quote(s))
	}
	return v, nil
}

// WithRlimit returns list with rl in place of any limit on the same resource.
func WithRlimit(list []Rlimit, rl Rlimit) []Rlimit {
	out := slices.DeleteFunc(slices.Clone(list), func(r Rlimit) bool { return r.Resource == rl.Resource })
	return append(out, rl)
}
