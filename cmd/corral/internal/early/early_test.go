package early

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The package that registers corral's first signals is initialised as
// soon as os/signal is only while it needs nothing os/signal does not
// (the Go runtime initialises packages in import-path order once their
// imports are): a new import here, or in sigstart or stagearg, would make
// it wait for that import's initialisers, and every package's that sorts
// before it.
func TestImportsOnlyWhatRegisteringNeeds(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	base := deps("os/signal")
	var extra []string
	for _, p := range deps(".") {
		if !slices.Contains(base, p) {
			extra = append(extra, p)
		}
	}
	want := []string{
		"github.com/corral-sh/corral/internal/sigstart",
		"github.com/corral-sh/corral/internal/stagearg",
		"github.com/corral-sh/corral/cmd/corral/internal/early",
	}
	slices.Sort(extra)
	slices.Sort(want)
	if !slices.Equal(extra, want) {
		t.Errorf("package early depends on %q beyond os/signal's dependencies, want only %q", extra, want)
	}
}
