//go:build linux

package main

import (
	"fmt"
	"io"

	"github.com/corral-sh/corral/cmd/corral/internal/ociconfig"
	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/internal/exitstatus"
)

// runSpec prints the config.json that reproduces corral's defaults (see
// ociconfig.Default for what it leaves out, and why).
func runSpec(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "usage: corral spec takes no arguments, got %s\nRun 'corral --help' for the options.\n", bounds.Quote(args[0]))
		return exitstatus.Usage
	}
	data, err := ociconfig.Default()
	if err != nil {
		fmt.Fprintf(stderr, "corral: spec: %v\n", err)
		return exitstatus.Failure
	}
	if _, err := stdout.Write(data); err != nil {
		fmt.Fprintf(stderr, "corral: spec: %v\n", err)
		return exitstatus.Failure
	}
	return 0
}
