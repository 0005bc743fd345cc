package wire

// Functions only tests use, kept beside the package they test.

// Strings writes a count, then each string. A nil and an empty slice are
// the same on the wire.
func (e *Encoder) Strings(ss []string) {
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
}

// Strings reads what Strings wrote; an empty list decodes as nil.
func (d *Decoder) Strings() []string {
	n := d.Uint()
	if d.err != nil {
		return nil
	}
	// Every string takes at least its length byte: a count beyond the
	// bytes left is a lie, and must not size an allocation.
	if n > uint64(len(d.b)) {
		d.fail("more strings than bytes left")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, d.String())
	}
	if d.err != nil {
		return nil
	}
	return out
}
