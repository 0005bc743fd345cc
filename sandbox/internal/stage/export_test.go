package stage

import "slices"

// Functions only tests use, kept beside the package they test.

// Messages returns the table.
func Messages() []Message { return slices.Clone(table[:]) }

// Steps lists every receive step.
func Steps() []Step {
	out := make([]Step, len(steps))
	for i := range out {
		out[i] = Step(i)
	}
	return out
}
