//go:build linux

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/corral-sh/corral/internal/exitstatus"
	"github.com/corral-sh/corral/sandbox"
)

func runProbe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: corral probe [--json]")
		return exitstatus.Usage
	}
	report := sandbox.Probe()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
		return 0
	}
	fmt.Fprintf(stdout, "corral probe: what this machine allows corral (uid %d)\n\n", report.UID)
	for _, c := range report.Checks {
		answer := "no "
		if c.Available {
			answer = "yes"
		}
		line := fmt.Sprintf("  %-18s %s", c.Name, answer)
		if c.Detail != "" {
			line += "  " + c.Detail
		}
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "\n--mode auto would use %s: %s\n", report.AutoMode, report.Reason)
	return 0
}
