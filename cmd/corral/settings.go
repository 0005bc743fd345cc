//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
)

// --settings (docs/usage.md, "Settings files"): a JSON file of options,
// turned into flag values that go before the command line's, so that the
// one flag parser reads both: a repeatable option's values from the file
// come first and the command line's are added, and for any other option
// the command line's value wins. Two formats:
//
//   - corral's: the keys are corral's long option names ("allow-net":
//     ["github.com"], "timeout": 5, "read-only": true, "setenv": {"A":
//     "1"}); a relative path resolves against the file's directory, and a
//     leading ~ against $HOME.
//   - sandbox-runtime's (~/.srt-settings.json), told by its top-level
//     "network" and "filesystem": each key mapped to corral's option of
//     the same meaning, never a weaker one; a key corral cannot honour as
//     strictly is refused by name.

var envSettings = []string{"CORRAL_SETTINGS"}

// pathKeys are the options whose values are paths.
var pathKeys = map[string]bool{"state": true, "config": true, "writable": true, "hide": true, "net-log": true, "log": true, "allow-unix": true, "overlay": true, "changes": true}

// settingsArgs reads the settings file at path and returns its flag
// values, each "--NAME=VALUE", for the flags of fs.
func settingsArgs(fs *flag.FlagSet, path string, lookup func(string) (string, bool)) ([]string, error) {
	data, err := readSettingsFile(path) // settingsinput.go
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("not a JSON object: data after the object")
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	home, _ := lookup("HOME")
	if _, ok := doc["network"]; ok {
		return srtArgs(doc, home)
	}
	if _, ok := doc["filesystem"]; ok {
		return srtArgs(doc, home)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return corralArgs(fs, doc, filepath.Dir(abs), home)
}

// corralArgs turns corral's format into flag values, in the order of the
// keys' names (the order within a repeatable option's list is kept).
func corralArgs(fs *flag.FlagSet, doc map[string]json.RawMessage, dir, home string) ([]string, error) {
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var args []string
	for _, key := range keys {
		raw := doc[key]
		fl := fs.Lookup(key)
		switch key {
		case "settings":
			return nil, fmt.Errorf("key %q: a settings file cannot name another", key)
		case "h", "help", "v":
			fl = nil
		}
		if fl == nil {
			return nil, fmt.Errorf("unknown key %s: want one of corral's long option names, e.g. \"allow-net\"", bounds.Quote(key))
		}
		path := func(p string) string {
			if !pathKeys[key] || p == "" {
				return p
			}
			return resolvePath(p, dir, home)
		}
		wrong := func(want string) error {
			return fmt.Errorf("key %q: want %s, got %s", key, want, bounds.Quote(string(raw)))
		}
		switch v := fl.Value.(type) {
		case *listFlag:
			if key == "setenv" {
				var m map[string]string
				if err := json.Unmarshal(raw, &m); err != nil || m == nil {
					return nil, wrong(`an object of strings, {"NAME": "VALUE"}`)
				}
				names := make([]string, 0, len(m))
				for n := range m {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					if err := checkVarName("setenv", n); err != nil {
						return nil, fmt.Errorf("key %q: %v", key, err)
					}
					args = append(args, "--setenv="+n+"="+m[n])
				}
				continue
			}
			var list []json.RawMessage
			if err := json.Unmarshal(raw, &list); err != nil || list == nil {
				return nil, wrong("a list")
			}
			for _, item := range list {
				s, ok := scalar(item)
				if !ok {
					return nil, wrong("a list of strings or numbers")
				}
				args = append(args, "--"+key+"="+path(s))
			}
		default:
			if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				var on bool
				if err := json.Unmarshal(raw, &on); err != nil {
					return nil, wrong("true or false")
				}
				if on { // false: as if not given
					args = append(args, "--"+key)
				}
				continue
			}
			s, ok := scalar(raw)
			if !ok {
				return nil, wrong("a string or a number")
			}
			args = append(args, "--"+key+"="+path(s))
		}
	}
	return args, nil
}

// scalar is a JSON string or number as text.
func scalar(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		return n.String(), true
	}
	return "", false
}

// resolvePath makes p absolute: a leading ~ is home, a relative path is
// beneath dir.
func resolvePath(p, dir, home string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home != "" {
			return filepath.Join(home, p[1:])
		}
		return p // left for the path's own check to refuse
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// srtArgs maps sandbox-runtime's settings to corral's options, never to
// weaker ones: srt allows no network and no writes unless told, so both
// sections must be there; an empty allowedDomains is --net none and an
// empty allowWrite --read-only. Its paths resolve as srt documents them:
// ~ is $HOME, a relative path is against the current directory.
func srtArgs(doc map[string]json.RawMessage, home string) ([]string, error) {
	s, err := readSRT(doc, home)
	if err != nil {
		return nil, err
	}
	args, err := s.networkArgs()
	if err != nil {
		return nil, err
	}
	fs, err := s.filesystemArgs()
	return append(args, fs...), err
}

// srtSettings are sandbox-runtime's two sections, checked for keys corral
// cannot honour as strictly as srt means them.
type srtSettings struct {
	sections map[string]map[string]json.RawMessage
	home     string
}

// srtLoosening are the keys that only ever loosen srt's sandbox: false
// (their default) is honoured, true is not.
var srtLoosening = map[string]bool{
	"enableWeakerNestedSandbox": true, "enableWeakerNetworkIsolation": true, "allowAppleEvents": true,
	"network.allowAllUnixSockets": true, "network.allowLocalBinding": true,
}

func readSRT(doc map[string]json.RawMessage, home string) (*srtSettings, error) {
	s := &srtSettings{sections: map[string]map[string]json.RawMessage{}, home: home}
	for _, name := range []string{"network", "filesystem"} {
		raw, ok := doc[name]
		if !ok {
			return nil, fmt.Errorf("sandbox-runtime settings without %q: srt's defaults are not corral's, so corral needs both \"network\" and \"filesystem\"", name)
		}
		var sec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sec); err != nil || sec == nil {
			return nil, fmt.Errorf("key %q: want an object", name)
		}
		s.sections[name] = sec
	}
	for key, raw := range doc {
		switch {
		case key == "network" || key == "filesystem":
		case key == "ignoreViolations": // which violations srt reports; corral reports none of them
		case srtLoosening[key]:
			if err := srtOff(key, raw); err != nil {
				return nil, err
			}
		default:
			return nil, srtUnsupported(key)
		}
	}
	return s, nil
}

// srtOff accepts a loosening key only when it is false.
func srtOff(key string, raw json.RawMessage) error {
	var on bool
	if err := json.Unmarshal(raw, &on); err != nil {
		return fmt.Errorf("key %q: want true or false", key)
	}
	if on {
		return fmt.Errorf("key %q: corral cannot honour it as strictly as sandbox-runtime means it (it loosens the sandbox): remove it or set it to false", key)
	}
	return nil
}

func srtUnsupported(key string) error {
	return fmt.Errorf("key %s: corral cannot honour it as strictly as sandbox-runtime means it", bounds.Quote(key))
}

func (s *srtSettings) list(sec, key string) ([]string, error) {
	raw, ok := s.sections[sec][key]
	if !ok {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("key %q: want a list of strings", sec+"."+key)
	}
	return l, nil
}

// paths is a list of literal paths, ~ made $HOME.
func (s *srtSettings) paths(sec, key string) ([]string, error) {
	l, err := s.list(sec, key)
	for i, p := range l {
		if strings.ContainsAny(p, "*?[") {
			return nil, fmt.Errorf("key %q: %s is a glob pattern; corral takes literal paths only", sec+"."+key, bounds.Quote(p))
		}
		if p == "" {
			return nil, fmt.Errorf("key %q: an empty path", sec+"."+key)
		}
		if p == "~" || strings.HasPrefix(p, "~/") {
			if s.home == "" {
				return nil, fmt.Errorf("key %q: %s: HOME is not set", sec+"."+key, bounds.Quote(p))
			}
			l[i] = filepath.Join(s.home, p[1:])
		}
	}
	return l, err
}

// networkArgs: allowedDomains, deniedDomains, allowUnixSockets.
func (s *srtSettings) networkArgs() ([]string, error) {
	for key, raw := range s.sections["network"] {
		switch key {
		case "allowedDomains", "deniedDomains", "allowUnixSockets":
		case "allowAllUnixSockets", "allowLocalBinding":
			if err := srtOff("network."+key, raw); err != nil {
				return nil, err
			}
		default:
			return nil, srtUnsupported("network." + key)
		}
	}
	allowed, err := s.list("network", "allowedDomains")
	if err != nil {
		return nil, err
	}
	denied, err := s.list("network", "deniedDomains")
	if err != nil {
		return nil, err
	}
	sockets, err := s.paths("network", "allowUnixSockets")
	if err != nil {
		return nil, err
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"allowedDomains", allowed}, {"deniedDomains", denied}} {
		for _, d := range l.list {
			if err := srtDomain(d); err != nil {
				return nil, fmt.Errorf("key \"network.%s\": %w", l.key, err)
			}
		}
	}
	var args []string
	if len(allowed) == 0 {
		args = append(args, "--net=none") // denied names change nothing then
	}
	for _, d := range allowed {
		if strings.Count(d, ":") > 1 && !strings.HasPrefix(d, "[") {
			return nil, fmt.Errorf("key \"network.allowedDomains\": %s: an IPv6 address must be bracketed, [ADDR] or [ADDR]:PORT, as sandbox-runtime wants it", bounds.Quote(d))
		}
		if !hasPort(d) {
			d += ":*" // srt: an entry without a port matches every port
		}
		args = append(args, "--allow-net="+d)
	}
	if len(allowed) > 0 {
		for _, d := range denied {
			if d == "*" || strings.HasPrefix(d, "*:") {
				return nil, fmt.Errorf("key \"network.deniedDomains\": %s denies every name, which corral's --deny-net does not take: for no network, leave allowedDomains empty", bounds.Quote(d))
			}
			args = append(args, "--deny-net="+d)
		}
	}
	for _, sock := range sockets {
		args = append(args, "--allow-unix="+sock)
	}
	return args, nil
}

// filesystemArgs: allowWrite and denyRead; denyWrite and allowRead only
// empty.
func (s *srtSettings) filesystemArgs() ([]string, error) {
	for key := range s.sections["filesystem"] {
		switch key {
		case "allowWrite", "denyRead", "denyWrite", "allowRead":
		default:
			return nil, srtUnsupported("filesystem." + key)
		}
	}
	for _, key := range []string{"denyWrite", "allowRead"} {
		// denyWrite carves a read-only hole in a writable path and
		// allowRead a readable one in a hidden path: corral's rules have
		// no such holes.
		if l, err := s.list("filesystem", key); err != nil || len(l) > 0 {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("key \"filesystem.%s\": corral cannot honour it as strictly as sandbox-runtime means it (its rules have no exceptions within a path); leave it empty", key)
		}
	}
	writable, err := s.paths("filesystem", "allowWrite")
	if err != nil {
		return nil, err
	}
	hidden, err := s.paths("filesystem", "denyRead")
	if err != nil {
		return nil, err
	}
	var args []string
	if len(writable) == 0 {
		args = append(args, "--read-only")
	}
	for _, p := range writable {
		args = append(args, "--writable="+p)
	}
	for _, p := range hidden {
		args = append(args, "--hide="+p)
	}
	return args, nil
}

// hasPort reports whether an srt domain entry ends in :PORT ([v6]:PORT
// for an IPv6 literal).
func hasPort(d string) bool {
	if strings.HasPrefix(d, "[") {
		return strings.Contains(d, "]:")
	}
	return strings.Contains(d, ":")
}

// srtDomain refuses an allowedDomains or deniedDomains entry that
// sandbox-runtime would not read as a domain, a wildcard or an IP address
// (with or without a port), where corral's --allow-net would read more:
// a CIDR there is a name that never matches for srt, and "0.0.0.0/0" was
// every address and every port for corral, the host's loopback included.
func srtDomain(d string) error {
	if !strings.Contains(d, "/") {
		return nil
	}
	host := d // without a port: [ADDR/N]:PORT, ADDR/N:PORT
	if rest, ok := strings.CutPrefix(d, "["); ok {
		host, _, _ = strings.Cut(rest, "]")
	} else if strings.Count(d, ":") == 1 {
		host, _, _ = strings.Cut(d, ":")
	}
	if _, err := netip.ParsePrefix(host); err == nil {
		return fmt.Errorf("%s is a CIDR, which sandbox-runtime reads as a domain name that never matches; for an address range, use corral's own settings key \"allow-net\" (e.g. {\"allow-net\": [\"10.0.0.0/8:443\"]})", bounds.Quote(d))
	}
	return fmt.Errorf("%s is not a domain, a wildcard or an IP address, as sandbox-runtime reads that list", bounds.Quote(d))
}
