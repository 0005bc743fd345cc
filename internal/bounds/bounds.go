package bounds

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Float resolves a bounded seconds-like value.
//
// When flagSet is true, flagValue wins and is parsed strictly: anything but a
// plain decimal number is an error naming the value and the bounds, so the
// caller can report a usage error. Otherwise envNames are consulted in order
// through lookup (os.LookupEnv in production); the first one that is set and
// non-empty wins, and if it does not parse, or is NaN or infinite, the result
// is def. With no flag and no variable the result is def.
//
// Whatever wins is clamped into [min, max], def included, so on a nil error
// the result is always within the bounds (min <= max is the caller's
// responsibility). Only the flag path can return an error.
func Float(flagValue string, flagSet bool, envNames []string, lookup func(string) (string, bool), def, min, max float64) (float64, error) {
	v, _, err := FloatNoted(flagValue, flagSet, envNames, lookup, def, min, max)
	return v, err
}

// FloatNoted is Float, and also says in note, when the value used is not
// the one given (clamped, or an environment value that did not parse),
// what was given and where: "45 from the flag is above the maximum 30".
// note is empty when the value used is the one given, or the default.
func FloatNoted(flagValue string, flagSet bool, envNames []string, lookup func(string) (string, bool), def, min, max float64) (float64, string, error) {
	if flagSet {
		v, err := parse(flagValue)
		if err != nil {
			return Clamp(def, min, max), "", fmt.Errorf("invalid value %s: want seconds between %s and %s",
				Quote(flagValue), format(min), format(max))
		}
		return Clamp(v, min, max), clampNote(flagValue, v, min, max), nil
	}
	if lookup != nil {
		for _, name := range envNames {
			raw, ok := lookup(name)
			if !ok || raw == "" {
				// An empty variable is how shells and manifests say "unset"
				// without unsetting; it must not shadow a lower-precedence name.
				continue
			}
			// Python's float(), which the supervisor corral replaces used, ignores surrounding
			// whitespace; values copied into YAML manifests often carry some.
			v, err := parse(strings.TrimSpace(raw))
			if err != nil {
				return Clamp(def, min, max), fmt.Sprintf("%s=%s is not a number of seconds: using the default %s", name, Quote(raw), format(Clamp(def, min, max))), nil
			}
			if note := clampNote(strings.TrimSpace(raw), v, min, max); note != "" {
				return Clamp(v, min, max), name + "=" + note, nil
			}
			return Clamp(v, min, max), "", nil
		}
	}
	return Clamp(def, min, max), "", nil
}

// clampNote says how v, given as text, was clamped; "" when it was not.
func clampNote(text string, v, min, max float64) string {
	switch c := Clamp(v, min, max); {
	case c == v:
		return ""
	case c == max:
		return fmt.Sprintf("%s is above the maximum: using %s", Quote(text), format(c))
	default:
		return fmt.Sprintf("%s is below the minimum: using %s", Quote(text), format(c))
	}
}

// Clamp returns v limited to [min, max]. NaN compares false against
// everything and would slip through both checks, so it is mapped to min to
// keep the result in range.
func Clamp(v, min, max float64) float64 {
	switch {
	case math.IsNaN(v), v < min:
		return min
	case v > max:
		return max
	}
	return v
}

// Seconds converts float seconds to a time.Duration, rounded to the nearest
// microsecond. It is total: NaN gives 0 and values beyond what a Duration can
// hold saturate rather than wrap, because a float-to-int conversion out of
// range is implementation-defined in Go.
func Seconds(v float64) time.Duration {
	const maxMicros = float64(math.MaxInt64 / int64(time.Microsecond))
	us := math.Round(v * 1e6)
	switch {
	case math.IsNaN(us):
		return 0
	case us >= maxMicros:
		return math.MaxInt64
	case us <= -maxMicros:
		return math.MinInt64
	}
	return time.Duration(us) * time.Microsecond
}

// Bool interprets an on/off environment value such as CORRAL_VERBOSE: "1",
// "true", "yes" and "on", in any case and with surrounding whitespace, are
// true; everything else, including the empty string, is false.
func Bool(value string) bool {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

var errSyntax = errors.New("not a decimal number")

// parse accepts only plain decimal numbers: an optional sign, digits with at
// most one decimal point, and an optional exponent. strconv.ParseFloat alone
// would also take "Inf", "NaN", hex floats and underscores, none of which is a
// sensible way to write seconds.
func parse(s string) (float64, error) {
	if !isDecimal(s) {
		return 0, errSyntax
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// The only failure left is overflow ("1e999"), for which ParseFloat
		// returns ±Inf: a well-formed number beyond any bound, which the
		// caller clamps like any other out-of-range value.
		var numErr *strconv.NumError
		if errors.As(err, &numErr) && numErr.Err == strconv.ErrRange {
			return v, nil
		}
		return 0, err
	}
	return v, nil
}

func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// format renders a bound the way a person would type it: 30, 0.01, 5.
func format(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// quoteMax is how much of a user's value an error message repeats.
const quoteMax = 64

// Quote renders a value a user gave for an error message: quoted as %q
// does, and cut to its first 64 bytes, with its length, when longer, so a
// pasted 100 KB value does not flood the terminal.
func Quote(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:quoteMax]), len(s))
}
