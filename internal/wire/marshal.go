package wire

import (
	"fmt"
	"reflect"
)

// Marshal encodes v, a struct or a pointer to one, field by field: what
// encoding/json does for corral's option structs, without going through
// text. Exported fields travel in declaration order; a field tagged
// `wire:"-"` or `json:"-"` stays behind (a writer, a callback). Supported
// are bools, integers, strings, and slices, arrays, pointers and structs of
// those; anything else is an error, so a field added to a message is
// either carried or refused, never silently dropped.
func Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem() // Unmarshal decodes into the pointee: no presence flag
	}
	var e Encoder
	if err := encodeValue(&e, rv, 0); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// Unmarshal decodes into v, a pointer, what Marshal wrote from a value of
// the same type.
func Unmarshal(payload []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("wire.Unmarshal needs a non-nil pointer, got %T", v)
	}
	d := NewDecoder(payload)
	if err := decodeValue(d, rv.Elem(), 0); err != nil {
		return err
	}
	return d.Finish()
}

// maxDepth bounds the nesting of types a message may have (a pointer to
// its own type would otherwise let a hostile message recurse without end).
const maxDepth = 32

func skipped(f reflect.StructField) bool {
	return !f.IsExported() || f.Tag.Get("wire") == "-" || f.Tag.Get("json") == "-"
}

func encodeValue(e *Encoder, v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("wire: %s nests deeper than %d", v.Type(), maxDepth)
	}
	switch v.Kind() {
	case reflect.Bool:
		e.Bool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.Int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.Uint(v.Uint())
	case reflect.String:
		e.String(v.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			e.String(string(v.Bytes()))
			return nil
		}
		e.Uint(uint64(v.Len()))
		for i := 0; i < v.Len(); i++ {
			if err := encodeValue(e, v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := encodeValue(e, v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		e.Bool(!v.IsNil())
		if !v.IsNil() {
			return encodeValue(e, v.Elem(), depth+1)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if skipped(t.Field(i)) {
				continue
			}
			if err := encodeValue(e, v.Field(i), depth+1); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), t.Field(i).Name, err)
			}
		}
	default:
		return fmt.Errorf("wire: cannot carry a %s", v.Type())
	}
	return nil
}

func decodeValue(d *Decoder, v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("wire: %s nests deeper than %d", v.Type(), maxDepth)
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(d.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := d.Int()
		if v.OverflowInt(n) {
			d.fail("integer out of range")
		} else {
			v.SetInt(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := d.Uint()
		if v.OverflowUint(n) {
			d.fail("unsigned integer out of range")
		} else {
			v.SetUint(n)
		}
	case reflect.String:
		v.SetString(d.String())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if s := d.String(); s != "" {
				v.SetBytes([]byte(s))
			} else {
				v.SetZero()
			}
			return d.err
		}
		// Each element takes at least one byte, so Count bounds the
		// allocation by what the message holds.
		n := d.Count()
		if n == 0 {
			v.SetZero()
			return nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n && d.err == nil; i++ {
			if err := decodeValue(d, s.Index(i), depth+1); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len() && d.err == nil; i++ {
			if err := decodeValue(d, v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		if !d.Bool() {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := decodeValue(d, p.Elem(), depth+1); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField() && d.err == nil; i++ {
			if skipped(t.Field(i)) {
				continue
			}
			if err := decodeValue(d, v.Field(i), depth+1); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), t.Field(i).Name, err)
			}
		}
	default:
		return fmt.Errorf("wire: cannot carry a %s", v.Type())
	}
	return d.err
}
