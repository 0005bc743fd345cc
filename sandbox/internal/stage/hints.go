package stage

import (
	"fmt"
	"strconv"

	"github.com/corral-sh/corral/internal/container"
	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// ArgsHint explains E2BIG: what one execve may carry, against what it
// carried. Both the exec stage (the runner's execve) and the host side
// (the init's, which carries the runner's environment) say it.
func ArgsHint(env, argv []string) string {
	total, longest, count := 0, 0, 0
	for _, list := range [][]string{argv, env} {
		for _, s := range list {
			n := len(s) + 1
			// Each string also costs a pointer on the new stack.
			total += n + 8
			longest = max(longest, n)
			count++
		}
	}
	var stack unix.Rlimit
	limit := "a quarter of RLIMIT_STACK"
	if unix.Getrlimit(unix.RLIMIT_STACK, &stack) == nil && stack.Cur != unix.RLIM_INFINITY {
		limit = fmt.Sprintf("%s (a quarter of RLIMIT_STACK %s)", sizeText(uint64(max(stack.Cur/4, 128<<10))), sizeText(stack.Cur))
	}
	return fmt.Sprintf("the runner's arguments and environment take %s in %d strings (the longest %s), above what one execve accepts: %s in all, 128 KiB for one string; pass large values in a file, or raise the stack limit (ulimit -s)",
		sizeText(uint64(total)), count, sizeText(uint64(longest)), limit)
}

func sizeText(n uint64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatUint(n, 10) + " bytes"
}

// NoFileHint is the fix for EMFILE in any of corral's processes: the
// limit it met, and how to raise it where corral runs.
func NoFileHint() string {
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	return fmt.Sprintf("corral has reached its open-file limit (RLIMIT_NOFILE %s, hard %s): raise it (ulimit -n; %s)", plan.RlimitValue(rl.Cur), plan.RlimitValue(rl.Max), container.Here().Ulimit("nofile"))
}
