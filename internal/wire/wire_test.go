package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// Bytes that UTF-8 or JSON would touch come back exactly.
func TestStringsRoundTripExactBytes(t *testing.T) {
	in := []string{"\xff", "a\xc3(b", "", "\x00", "line\nbreak", "\xed\xa0\x80", strings.Repeat("\xfe", 70000)}
	var e Encoder
	e.Strings(in)
	e.String("X\xffK=v\xfe")
	d := NewDecoder(e.Bytes())
	out := d.Strings()
	last := d.String()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d strings, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("string %d: got %q, want %q", i, out[i], in[i])
		}
	}
	if last != "X\xffK=v\xfe" {
		t.Errorf("got %q", last)
	}
}

func TestDecoderRejects(t *testing.T) {
	for name, payload := range map[string][]byte{
		"empty":            {},
		"truncated varint": {0x80},
		"string too long":  {5, 'a', 'b'},
		"count too large":  {0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewDecoder(payload)
			d.Strings()
			if err := d.Finish(); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Finish: %v, want ErrMalformed", err)
			}
		})
	}
	d := NewDecoder([]byte{0, 7})
	d.Uint()
	if err := d.Finish(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	d = NewDecoder([]byte{2})
	if d.Bool(); !errors.Is(d.Finish(), ErrMalformed) {
		t.Fatal("bool 2 accepted")
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, 7, []byte("payload\xff")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&buf, 8, nil); err != nil {
		t.Fatal(err)
	}
	whole := append([]byte(nil), buf.Bytes()...)
	kind, p, err := ReadFrame(&buf)
	if err != nil || kind != 7 || string(p) != "payload\xff" {
		t.Fatalf("first frame: %d %q %v", kind, p, err)
	}
	kind, p, err = ReadFrame(&buf)
	if err != nil || kind != 8 || len(p) != 0 {
		t.Fatalf("second frame: %d %q %v", kind, p, err)
	}
	if _, _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	for cut := 1; cut < 13; cut++ { // the first frame is 13 bytes
		if _, _, err := ReadFrame(bytes.NewReader(whole[:cut])); err != io.ErrUnexpectedEOF {
			t.Errorf("frame cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	for _, head := range [][]byte{{0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}} {
		if _, _, err := ReadFrame(bytes.NewReader(head)); !errors.Is(err, ErrMalformed) {
			t.Errorf("length %x: %v, want ErrMalformed", head, err)
		}
	}
}

// A frame that claims the limit but carries little costs what it carried.
func TestReadFrameDoesNotTrustTheLength(t *testing.T) {
	claim := []byte{0x03, 0xff, 0xff, 0xff, 1, 'x'}
	allocs := testing.AllocsPerRun(10, func() {
		ReadFrame(bytes.NewReader(claim))
	})
	if allocs > 10 {
		t.Errorf("%v allocations for a 6-byte stream", allocs)
	}
}

// Whatever strings and numbers go in come out, in order.
func FuzzRoundTrip(f *testing.F) {
	f.Add("\xff", "a\xc3(", uint64(0), int64(-1), true)
	f.Add("", "", uint64(1<<63), int64(-1<<63), false)
	f.Fuzz(func(t *testing.T, a, b string, u uint64, i int64, flag bool) {
		var e Encoder
		e.String(a)
		e.Uint(u)
		e.Strings([]string{b, a, ""})
		e.Int(i)
		e.Bool(flag)
		var frame bytes.Buffer
		if err := WriteFrame(&frame, 3, e.Bytes()); err != nil {
			t.Fatal(err)
		}
		kind, payload, err := ReadFrame(&frame)
		if err != nil || kind != 3 {
			t.Fatalf("ReadFrame: %d %v", kind, err)
		}
		d := NewDecoder(payload)
		ga, gu, gs, gi, gf := d.String(), d.Uint(), d.Strings(), d.Int(), d.Bool()
		if err := d.Finish(); err != nil {
			t.Fatal(err)
		}
		if ga != a || gu != u || len(gs) != 3 || gs[0] != b || gs[1] != a || gs[2] != "" || gi != i || gf != flag {
			t.Fatalf("round trip changed the values")
		}
	})
}

// No byte sequence makes the decoder or the frame reader panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{3, 1, 'a', 0, 0x80})
	f.Add([]byte{0, 0, 0, 2, 5, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		ReadFrame(bytes.NewReader(data))
		d := NewDecoder(data)
		// Every read consumes a byte or fails for good, so this ends.
		for d.err == nil && len(d.b) > 0 {
			d.Strings()
			d.Count()
			d.Int()
			d.Bool()
			_ = d.String()
			d.Uint()
		}
	})
}
