package main

import (
	"testing"

	"github.com/corral-sh/corral/cmd/corral/internal/early"
)

// Package early holds the one list of subcommands, and run dispatches a
// listed name without looking further: each must have its handler here.
func TestEverySubcommandHasAHandler(t *testing.T) {
	for _, name := range early.Subcommands() {
		if subcommand(name) == nil {
			t.Errorf("subcommand %q is listed in package early but main has no handler for it", name)
		}
	}
	if subcommand("run") != nil || early.IsSubcommand("run") {
		t.Error(`"run" is no subcommand, yet it has a handler or is listed`)
	}
}
