//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/corral-sh/corral/sandbox"
)

const changesUsage = `usage: corral changes show PATH [--stat] | apply PATH [--force] | discard PATH | list`

// runChanges is corral changes: the user's side of an --overlay run's
// changes folder (docs/overlay.md). 0: done; 1: refused or failed; 2:
// usage.
func runChanges(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, changesUsage)
		return 2
	}
	verb, rest := args[0], args[1:]
	var path string
	flags := map[string]bool{}
	for _, a := range rest {
		switch {
		case a == "--stat" && verb == "show", a == "--force" && verb == "apply":
			flags[a] = true
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(stderr, "usage: corral changes %s: unknown option %s\n%s\n", verb, a, changesUsage)
			return 2
		case path == "":
			path = a
		default:
			fmt.Fprintf(stderr, "usage: corral changes %s takes one PATH\n%s\n", verb, changesUsage)
			return 2
		}
	}
	if (verb == "list") != (path == "") {
		fmt.Fprintln(stderr, changesUsage)
		return 2
	}
	var err error
	switch verb {
	case "show":
		err = sandbox.ChangesShow(stdout, path, flags["--stat"])
	case "apply":
		err = sandbox.ChangesApply(stdout, path, flags["--force"])
	case "discard":
		err = sandbox.ChangesDiscard(path)
	case "list":
		err = sandbox.ChangesList(stdout)
	default:
		fmt.Fprintf(stderr, "usage: corral changes: unknown command %s\n%s\n", verb, changesUsage)
		return 2
	}
	var refused *sandbox.ApplyRefusal
	if errors.As(err, &refused) {
		for _, r := range refused.Reasons {
			fmt.Fprintf(stderr, "corral: changes apply: refused: %s\n", r)
		}
		fmt.Fprintln(stderr, "corral: changes apply: nothing was written")
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "corral: changes %s: %v\n", verb, err)
		return 1
	}
	return 0
}
