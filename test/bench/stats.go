package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// samples are the measurements of one cell, in one unit.
type samples []float64

func (s samples) sorted() []float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	return c
}

// quantile interpolates linearly between the closest ranks.
func (s samples) quantile(q float64) float64 {
	c := s.sorted()
	if len(c) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(c)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return c[lo] + (c[hi]-c[lo])*(pos-float64(lo))
}

func (s samples) median() float64 { return s.quantile(0.5) }
func (s samples) min() float64    { return s.quantile(0) }
func (s samples) max() float64    { return s.quantile(1) }

// spread is "p10–p90" from 10 samples on, "min–max" below, each value
// multiplied by scale.
func (s samples) spread(format string, scale float64) string {
	if len(s) == 0 {
		return "—"
	}
	if len(s) >= 10 {
		return fmt.Sprintf(format+"–"+format, s.quantile(0.1)*scale, s.quantile(0.9)*scale)
	}
	return fmt.Sprintf(format+"–"+format, s.min()*scale, s.max()*scale)
}

func spreadName(n int) string {
	if n >= 10 {
		return "p10–p90"
	}
	return "min–max"
}

// table prints a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// skip adds a row for a launcher that cannot run, its reason in the first
// cell after the name.
func (t *table) skip(name, reason string) {
	cells := make([]string, len(t.head))
	cells[0] = name
	for i := 1; i < len(cells); i++ {
		cells[i] = ""
	}
	if len(cells) > 1 {
		cells[1] = reason
	}
	t.rows = append(t.rows, cells)
}

func (t *table) print(w io.Writer) {
	fmt.Fprintln(w, "| "+strings.Join(t.head, " | ")+" |")
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	fmt.Fprintln(w, "|"+strings.Join(sep, "|")+"|")
	for _, r := range t.rows {
		fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
	}
	fmt.Fprintln(w)
}

func ms(ns float64) float64 { return ns / 1e6 }
