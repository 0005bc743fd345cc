package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Resource int
	Soft     uint64
	Hard     uint64
}

type sample struct {
	Name     string
	Args     []string
	Grace    time.Duration
	Flag     bool
	Small    int8
	Keep     []int
	Limits   []inner
	Nested   inner
	Mask     [4]uint64
	Raw      []byte
	Opt      *inner
	Writer   io.Writer `json:"-"`
	Callback func()    `wire:"-"`
	private  string
}

func full() sample {
	return sample{
		Name: "/t\xffmp/r\xfeunner", Args: []string{"\xff", "", "a\xc3(b"}, Grace: -3 * time.Second,
		Flag: true, Small: -128, Keep: []int{0, 10, 40}, Limits: []inner{{7, 1, 1 << 63}, {}},
		Nested: inner{Resource: -1}, Mask: [4]uint64{1 << 9, 0, 0, 1}, Raw: []byte{0, 0xff},
		Opt: &inner{Soft: 5},
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	in := full()
	in.Writer, in.private = &bytes.Buffer{}, "stays"
	data, err := Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out sample
	if err := Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	want := full()
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got  %#v\nwant %#v", out, want)
	}
	// The zero value, with its nil slices and pointer, too.
	data, err = Marshal(sample{})
	if err != nil {
		t.Fatal(err)
	}
	out = full()
	if err := Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, sample{}) {
		t.Errorf("zero value came back as %#v", out)
	}
}

func TestMarshalRefusesWhatItCannotCarry(t *testing.T) {
	for _, v := range []any{
		struct{ M map[string]int }{},
		struct{ W io.Writer }{},
		struct{ C chan int }{},
		struct{ F float64 }{},
	} {
		if _, err := Marshal(v); err == nil || !strings.Contains(err.Error(), "cannot carry") {
			t.Errorf("Marshal(%T): %v, want a refusal", v, err)
		}
	}
	type loop struct{ Next *loop }
	deep := &loop{}
	for i := 0; i < 40; i++ {
		deep = &loop{Next: deep}
	}
	if _, err := Marshal(deep); err == nil {
		t.Error("Marshal of 40 nested pointers succeeded")
	}
}

func TestUnmarshalRejectsTruncatedAndTrailing(t *testing.T) {
	data, err := Marshal(full())
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(data); cut++ {
		var out sample
		if err := Unmarshal(data[:cut], &out); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d of %d: %v, want ErrMalformed", cut, len(data), err)
		}
	}
	var out sample
	if err := Unmarshal(append(data, 0), &out); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	var small struct{ Small int8 }
	if err := Unmarshal([]byte{0x80, 0x04}, &small); !errors.Is(err, ErrMalformed) {
		t.Fatalf("int8 of 256: %v", err)
	}
	if err := Unmarshal(nil, small); err == nil {
		t.Fatal("Unmarshal into a non-pointer succeeded")
	}
}

// Any payload decodes into a value or an error, never a panic.
func FuzzUnmarshal(f *testing.F) {
	data, _ := Marshal(full())
	f.Add(data)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out sample
		if Unmarshal(data, &out) != nil {
			return
		}
		// What decoded encodes back to the same bytes: the encoding has
		// one form per value.
		again, err := Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			var back sample
			if err := Unmarshal(again, &back); err != nil || !reflect.DeepEqual(back, out) {
				t.Fatalf("re-encoding changed the value: %v", err)
			}
		}
	})
}
