package main

import (
	"fmt"
	"github.com/corral-sh/corral/internal/bounds"
	"io"

	"github.com/corral-sh/corral/cmd/corral/internal/ociconfig"
)

// runSpec prints the config.json that reproduces corral's defaults (see
// ociconfig.Default for what it leaves out, and why).
func runSpec(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "usage: corral spec takes no arguments, got %s\nRun 'corral --help' for the options.\n", bounds.Quote(args[0]))
		return exitUsage
	}
	data, err := ociconfig.Default()
	if err != nil {
		fmt.Fprintf(stderr, "corral: spec: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(data); err != nil {
		fmt.Fprintf(stderr, "corral: spec: %v\n", err)
		return 1
	}
	return 0
}
