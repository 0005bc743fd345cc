package main

import "github.com/corral-sh/corral/sandbox"

// Functions only tests use, kept beside the package they test.

// parseRun turns the command line and environment into launch options.
// Flags are strict (a malformed value is a usage error); environment
// values are lenient (a malformed one means the default).
func parseRun(args []string, lookup func(string) (string, bool)) (sandbox.Options, error) {
	o, _, err := parseRunNoted(args, lookup)
	return o, err
}
