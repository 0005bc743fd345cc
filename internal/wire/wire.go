// Package wire is the byte encoding of the messages corral's processes pass
// each other across a re-exec of corral itself (the pidns init, the exec
// stage, the probe child).
//
// What crosses is arguments, environment entries and paths, which are bytes
// in whatever encoding the caller used: nothing here goes through UTF-8 (as
// encoding/json would, turning invalid sequences into U+FFFD). A message is
// one frame: a 4-byte big-endian length, a kind byte, then the payload, a
// sequence of unsigned and signed varints and length-prefixed byte strings.
// The sender and the receiver are the same binary, so the layout of each
// payload is fixed by the code that writes it; the decoder only has to make
// sure that no message, however truncated or hostile, makes it panic or
// allocate more than the frame it was given.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrame bounds a frame. The largest real message carries a runner's
// argv and environment, which execve caps at a few MiB.
const MaxFrame = 64 << 20

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed message")

// Encoder appends values to a payload.
type Encoder struct{ b []byte }

// Bytes returns the payload written so far.
func (e *Encoder) Bytes() []byte { return e.b }

func (e *Encoder) Uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *Encoder) Int(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *Encoder) Bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// String writes s byte for byte, its length first.
func (e *Encoder) String(s string) {
	e.Uint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// Decoder reads values back in the order they were written. The first
// problem sticks: later reads return zero values, and Finish reports it.
type Decoder struct {
	b   []byte
	err error
}

func NewDecoder(payload []byte) *Decoder { return &Decoder{b: payload} }

func (d *Decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
	d.b = nil
}

func (d *Decoder) Uint() uint64 { return varint(d, binary.Uvarint, "bad unsigned varint") }
func (d *Decoder) Int() int64   { return varint(d, binary.Varint, "bad signed varint") }

func varint[T uint64 | int64](d *Decoder, read func([]byte) (T, int), what string) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Decoder) Bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail("bad bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *Decoder) String() string {
	n := d.Uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string longer than the message")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Count reads a count of items that each take at least one byte, so a
// caller can size a slice by it.
func (d *Decoder) Count() int {
	n := d.Uint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)) {
		d.fail("more items than bytes left")
		return 0
	}
	return int(n)
}

// Finish reports the first decoding problem, or bytes left over.
func (d *Decoder) Finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", ErrMalformed, len(d.b))
	}
	return nil
}

// WriteFrame writes one message in a single write, so that a reader on a
// stream socket never sees another writer's bytes in the middle of it.
func WriteFrame(w io.Writer, kind byte, payload []byte) error {
	if len(payload)+1 > MaxFrame {
		return fmt.Errorf("message of %d bytes exceeds the %d-byte limit", len(payload), MaxFrame)
	}
	buf := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(len(payload)+1))
	buf[4] = kind
	_, err := w.Write(append(buf, payload...))
	return err
}

// ReadFrame reads one message. io.EOF means the writer closed without
// sending anything; a frame cut short is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:4]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[:4])
	if n == 0 || n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: frame length %d", ErrMalformed, n)
	}
	if _, err := io.ReadFull(r, head[4:]); err != nil {
		return 0, nil, unexpected(err)
	}
	// Read in bounded steps rather than trust n with one allocation: a
	// short stream then costs what it carried, not what it claimed.
	var body []byte
	for rest := int(n) - 1; rest > 0; {
		step := min(rest, 64<<10)
		start := len(body)
		body = append(body, make([]byte, step)...)
		if _, err := io.ReadFull(r, body[start:]); err != nil {
			return 0, nil, unexpected(err)
		}
		rest -= step
	}
	return head[4], body, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
