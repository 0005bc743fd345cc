package plan

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/internal/setuperr"
)

// OverlayMount is one --overlay DIR as the exec stage mounts it: lower =
// Dir, Upper and Work in the run's changes folder (SPEC, "Copy-on-write
// workspace"). The host side fills them in (package sandbox, overlay.go).
type OverlayMount struct {
	Dir, Upper, Work string
}

// checkOverlay refuses --overlay where it cannot mean anything: it needs
// the runner's own mount namespace, which only pidns mode makes.
func (p *Plan) checkOverlay() error {
	if len(p.Overlay) == 0 {
		if p.Changes != "" {
			return usage("--changes", "--changes says where --overlay keeps a run's changes: give --overlay DIR too")
		}
		return nil
	}
	for i, d := range p.Overlay {
		if !filepath.IsAbs(d) {
			return usage("--overlay", fmt.Sprintf("--overlay %s: want an absolute path", bounds.Quote(d)))
		}
		for _, e := range p.Overlay[:i] {
			if e == d || beneathDir(d, e) || beneathDir(e, d) {
				return usage("--overlay", fmt.Sprintf("--overlay %s and --overlay %s overlap: give the outer one alone", bounds.Quote(e), bounds.Quote(d)))
			}
		}
	}
	if p.Mode == ModeSubreaper {
		return &setuperr.SetupError{Step: "--overlay " + p.Overlay[0], Err: errors.New("subreaper mode has no mount namespace to mount the copy-on-write layer in"),
			Hint: "use --mode pidns or --mode auto"}
	}
	return nil
}

func beneathDir(path, dir string) bool {
	return dir == "/" || len(path) > len(dir) && path[:len(dir)] == dir && path[len(dir)] == '/'
}
