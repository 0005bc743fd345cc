package cgroup

import (
	"os"
	"testing"
)

// What a run pays at start (Find, New) and at the end (Remove), beside the
// launch benchmark's figures.

func BenchmarkFind(b *testing.B) {
	if _, err := Find(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := Find(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewRemove(b *testing.B) {
	p, err := Find()
	if err != nil || os.Geteuid() != 0 {
		b.Skip("needs root and a usable cgroup v2:", err)
	}
	for b.Loop() {
		c, err := p.New()
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPopulated(b *testing.B) {
	p, err := Find()
	if err != nil || os.Geteuid() != 0 {
		b.Skip("needs root and a usable cgroup v2:", err)
	}
	c, err := p.New()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Remove()
	for b.Loop() {
		if _, err := c.Populated(); err != nil {
			b.Fatal(err)
		}
	}
}
