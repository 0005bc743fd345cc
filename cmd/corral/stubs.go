package main

import (
	"fmt"
	"io"
)

func runSpec(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "corral: spec is not built yet")
	return exitSetup
}
