package main

import (
	"testing"

	"github.com/corral-sh/corral/cmd/corral/internal/early"
)

// Package early holds the one list of subcommands, and run dispatches a
// listed name without looking further: each must have its handler here,
// and no other name may have one.
func TestEverySubcommandHasAHandler(t *testing.T) {
	for _, name := range []string{early.Version, early.Probe, early.Spec} {
		if !early.IsSubcommand(name) || subcommand(name) == nil {
			t.Errorf("subcommand %q: listed %v, handled %v; want both", name, early.IsSubcommand(name), subcommand(name) != nil)
		}
	}
	for _, name := range []string{"run", "help", "--version", ""} {
		if early.IsSubcommand(name) || subcommand(name) != nil {
			t.Errorf("%q is no subcommand, yet it is listed or handled", name)
		}
	}
}
