package ociconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/corral-sh/corral/internal/bounds"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/corral-sh/corral/sandbox"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// File is the part of an OCI runtime-spec config.json that applies to one
// contained command, validated and translated. A field is set only when the
// file set it, so Apply can tell "the file said so" from "the default".
type File struct {
	Args []string // process.args; nil when absent
	// Env is process.env; EnvSet says it was given (even empty), and then
	// it replaces the inherited environment, as runc does.
	Env    []string
	EnvSet bool
	Cwd    string // process.cwd, absolute; "" inherits the caller's
	// Keep is process.capabilities: the one set corral keeps in all five.
	Keep    []int
	KeepSet bool
	// NoNewPrivs is process.noNewPrivileges; nil keeps corral's default
	// (set), which is stricter than runc's (unset).
	NoNewPrivs *bool
	Rlimits    []sandbox.Rlimit   // process.rlimits, in file order, one per resource
	Namespaces sandbox.Namespaces // linux.namespaces and hostname
	ReadOnly   bool               // root.readonly, with root.path "/": --read-only (root.go)
}

// Error names the JSON path of a config field corral refuses.
type Error struct {
	Path        string // e.g. "linux.seccomp", "process.rlimits[0].type"
	Unsupported bool   // a field corral does not implement
	Reason      string
}

func (e *Error) Error() string {
	if len(e.Path) > 128 {
		// A key is the user's text too: never echo a pasted megabyte.
		e = &Error{Path: fmt.Sprintf("%s... (%d bytes)", e.Path[:128], len(e.Path)), Unsupported: e.Unsupported, Reason: e.Reason}
	}
	if e.Unsupported {
		if e.Reason == "" {
			return "unsupported: " + e.Path
		}
		return "unsupported: " + e.Path + " (" + e.Reason + ")"
	}
	return e.Path + ": " + e.Reason
}

// maxConfigSize bounds what Load reads, so that a mistaken
// --config /dev/zero fails instead of eating memory.
const maxConfigSize = 4 << 20

// Load reads and parses a config.json; path may be a pipe, as with
// --config <(corral spec).
func Load(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("larger than %d bytes: not a config.json", maxConfigSize)
	}
	return Parse(data)
}

// Parse validates a config.json and translates it. Every field that
// is present is either honoured or refused with an error naming its JSON
// path: the raw document is walked against configShape, the allow-list,
// so a field corral does not implement is refused by name even when the
// specs-go types do not know it (a typo, a newer spec).
func Parse(data []byte) (*File, error) {
	raw, err := decodeStrict(data)
	if err != nil {
		return nil, err
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	if err := checkShape(top, configShape(), "", ""); err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, &Error{Path: concretePath(top, typeErr.Field, typeErr.Value), Reason: fmt.Sprintf("a JSON %s is not a %s", typeErr.Value, typeName(typeErr.Type))}
		}
		return nil, err
	}
	return translate(&spec, top)
}

// concretePath finds, in the raw document, the value a specs-go type error
// is about: encoding/json names the field without list indices
// ("process.rlimits.soft"), so the first element of each list whose value
// there has the wrong JSON kind is the one (process.rlimits[1].soft).
func concretePath(top map[string]any, field, value string) string {
	kind, _, _ := strings.Cut(value, " ") // "number -1" for a negative uint
	if p, ok := findKind(top, strings.Split(field, "."), "", kind); ok {
		return p
	}
	return field
}

func findKind(v any, parts []string, prefix, kind string) (string, bool) {
	if list, ok := v.([]any); ok && (len(parts) > 0 || kind != "array") {
		for i, el := range list {
			if p, ok := findKind(el, parts, fmt.Sprintf("%s[%d]", prefix, i), kind); ok {
				return p, true
			}
		}
		return "", false
	}
	if len(parts) == 0 {
		return prefix, jsonKind(v) == kind
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	child, ok := obj[parts[0]]
	if !ok {
		return "", false
	}
	p := parts[0]
	if prefix != "" {
		p = prefix + "." + p
	}
	return findKind(child, parts[1:], p, kind)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// maxConfigDepth bounds nesting; a real config.json is a handful deep.
const maxConfigDepth = 64

// decodeStrict decodes JSON into maps, lists and json.Numbers like
// json.Unmarshal, but refuses a key given twice in one object: specs-go
// would take the last one, or even merge both into one struct, so a field
// hidden in the first copy could slip past the allow-list unseen.
func decodeStrict(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidJSON(err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxConfigDepth {
		return nil, fmt.Errorf("not a config.json: nested deeper than %d", maxConfigDepth)
	}
	switch delim {
	case '{':
		obj := map[string]any{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, invalidJSON(err)
			}
			key, _ := tok.(string) // the decoder only gives strings here
			p := key
			if path != "" {
				p = path + "." + key
			}
			if _, dup := obj[key]; dup {
				return nil, &Error{Path: p, Reason: "given twice"}
			}
			if obj[key], err = decodeValue(dec, p, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, invalidJSON(err)
		}
		return obj, nil
	case '[':
		list := []any{}
		for i := 0; dec.More(); i++ {
			v, err := decodeValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, invalidJSON(err)
		}
		return list, nil
	}
	return nil, fmt.Errorf("not valid JSON: unexpected %v", delim)
}

func invalidJSON(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative integer (" + t.String() + ")"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer (" + t.String() + ")"
	case reflect.Struct, reflect.Pointer, reflect.Map:
		return "object"
	}
	return t.String()
}

// shape is a node of the allow-list: an object with its allowed keys, an
// array of one element shape, or (neither) a leaf whose type specs-go
// checks.
type shape struct {
	fields map[string]*shape
	elem   *shape
}

var leaf = &shape{}

func object(fields map[string]*shape) *shape { return &shape{fields: fields} }
func array(elem *shape) *shape               { return &shape{elem: elem} }

// configShape is every JSON path corral honours; nothing else may be set.
// A change here needs a matching change in translate, and in the fuzz
// test's list of what each path must change in the result. Built on first
// use: a run without --config never needs it.
var configShape = sync.OnceValue(func() *shape {
	return object(map[string]*shape{
		"ociVersion": leaf,
		"hostname":   leaf,
		"root":       object(map[string]*shape{"path": leaf, "readonly": leaf}), // root.go
		"process": object(map[string]*shape{
			"terminal":        leaf,
			"args":            array(leaf),
			"env":             array(leaf),
			"cwd":             leaf,
			"noNewPrivileges": leaf,
			"user":            object(map[string]*shape{"uid": leaf, "gid": leaf}),
			"capabilities": object(map[string]*shape{
				"bounding": array(leaf), "effective": array(leaf), "inheritable": array(leaf),
				"permitted": array(leaf), "ambient": array(leaf),
			}),
			"rlimits": array(object(map[string]*shape{"type": leaf, "soft": leaf, "hard": leaf})),
		}),
		"linux": object(map[string]*shape{
			"namespaces": array(object(map[string]*shape{"type": leaf})),
		}),
	})
})

// unsupportedHints explain the refusals users meet most, by path pattern
// (indices written as []).
var unsupportedHints = map[string]string{
	"mounts":                      "corral mounts nothing but a private /proc",
	"hooks":                       "corral runs no hooks",
	"domainname":                  "only hostname can be set",
	"linux.namespaces[].path":     "corral creates namespaces; it cannot join one",
	"linux.uidMappings":           "corral maps the caller's uid to itself",
	"linux.gidMappings":           "corral maps the caller's gid to itself",
	"linux.resources":             "corral creates no cgroup; process.rlimits and --rlimit set per-process limits",
	"linux.seccomp":               "corral installs only its own filter, against terminal input injection",
	"process.consoleSize":         "corral allocates no terminal",
	"process.user.umask":          "the runner inherits the caller's umask",
	"process.user.username":       "the runner keeps the caller's uid",
	"process.user.additionalGids": "the runner keeps the caller's groups",
}

// checkShape walks v against s. null counts as absent for an allowed key
// (specs-go decodes it so) but is refused as an array element; a key that
// is not allowed is refused whatever its value, null included.
func checkShape(v any, s *shape, path, pattern string) error {
	if v == nil {
		return nil
	}
	switch {
	case s.fields != nil:
		obj, ok := v.(map[string]any)
		if !ok {
			return &Error{Path: path, Reason: "want a JSON object"}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, pat := k, k
			if path != "" {
				p, pat = path+"."+k, pattern+"."+k
			}
			child, ok := s.fields[k]
			if !ok {
				return &Error{Path: p, Unsupported: true, Reason: unsupportedHints[pat]}
			}
			if err := checkShape(obj[k], child, p, pat); err != nil {
				return err
			}
		}
	case s.elem != nil:
		list, ok := v.([]any)
		if !ok {
			return &Error{Path: path, Reason: "want a JSON list"}
		}
		for i, e := range list {
			p := fmt.Sprintf("%s[%d]", path, i)
			if e == nil {
				return &Error{Path: p, Reason: "null is not allowed here"}
			}
			if err := checkShape(e, s.elem, p, pattern+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// has reports whether obj sets key to something other than null.
func has(obj map[string]any, key string) bool {
	v, ok := obj[key]
	return ok && v != nil
}

// sub returns obj[key] as an object, or nil.
func sub(obj map[string]any, key string) map[string]any {
	m, _ := obj[key].(map[string]any)
	return m
}

// translate validates what specs-go decoded; raw (already shape-checked)
// says which fields were present.
func translate(s *specs.Spec, raw map[string]any) (*File, error) {
	c := &File{}
	if err := checkVersion(s.Version); err != nil {
		return nil, err
	}
	if s.Process != nil {
		if err := c.process(s.Process, sub(raw, "process")); err != nil {
			return nil, err
		}
	}
	if s.Root != nil {
		if err := c.root(s.Root, sub(raw, "root")); err != nil {
			return nil, err
		}
	}
	if s.Linux != nil && has(sub(raw, "linux"), "namespaces") {
		if err := c.namespaces(s.Linux.Namespaces); err != nil {
			return nil, err
		}
	}
	if s.Hostname != "" {
		switch {
		case !c.Namespaces.UTS:
			return nil, &Error{Path: "hostname", Reason: `needs a uts namespace: add {"type": "uts"} to linux.namespaces`}
		case len(s.Hostname) > 64: // HOST_NAME_MAX; sethostname(2) refuses longer
			return nil, &Error{Path: "hostname", Reason: "longer than 64 bytes"}
		case strings.IndexByte(s.Hostname, 0) >= 0:
			return nil, &Error{Path: "hostname", Reason: "contains a NUL byte"}
		}
		c.Namespaces.Hostname = s.Hostname
	}
	return c, nil
}

// versionMajor returns the major number of a runtime-spec version, semver
// with an optional pre-release and build suffix (MAJOR.MINOR.PATCH[-PRE]
// [+BUILD], numbers without leading zeros), and whether v is one. Written
// out rather than a regular expression: linking package regexp makes every
// corral process build the unicode package's tables as it starts.
func versionMajor(v string) (string, bool) {
	core, build, hasBuild := strings.Cut(v, "+")
	if hasBuild && !suffixOK(build) {
		return "", false
	}
	core, pre, hasPre := strings.Cut(core, "-")
	if hasPre && !suffixOK(pre) {
		return "", false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return "", false
	}
	for _, n := range parts {
		if n == "" || (len(n) > 1 && n[0] == '0') || strings.Trim(n, "0123456789") != "" {
			return "", false
		}
	}
	return parts[0], true
}

// suffixOK: a pre-release or build suffix is one or more of [0-9A-Za-z.-].
func suffixOK(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// checkVersion accepts any 1.x.y, and an absent or empty ociVersion (which
// asks for nothing); corral reads what specs-go 1.x describes.
func checkVersion(v string) error {
	if v == "" {
		return nil
	}
	major, ok := versionMajor(v)
	if !ok {
		return &Error{Path: "ociVersion", Reason: fmt.Sprintf("%s is not a version like %s", bounds.Quote(v), specs.Version)}
	}
	if major != "1" {
		return &Error{Path: "ociVersion", Reason: fmt.Sprintf("%s: unsupported major version %s: corral reads runtime-spec 1.x", bounds.Quote(v), major)}
	}
	return nil
}

func (c *File) process(p *specs.Process, raw map[string]any) error {
	if p.Terminal {
		return &Error{Path: "process.terminal", Unsupported: true,
			Reason: "true: corral allocates no terminal; the runner gets the caller's stdio"}
	}
	if user := sub(raw, "user"); user != nil {
		// corral runs the runner with its caller's ids (mapped to themselves
		// in a user namespace); it can only confirm them, never change them.
		if has(user, "uid") && int64(p.User.UID) != int64(os.Getuid()) {
			return &Error{Path: "process.user.uid", Unsupported: true,
				Reason: fmt.Sprintf("%d: the runner keeps corral's uid %d; run corral as that user", p.User.UID, os.Getuid())}
		}
		if has(user, "gid") && int64(p.User.GID) != int64(os.Getgid()) {
			return &Error{Path: "process.user.gid", Unsupported: true,
				Reason: fmt.Sprintf("%d: the runner keeps corral's gid %d; run corral as that user", p.User.GID, os.Getgid())}
		}
	}
	if has(raw, "args") {
		if len(p.Args) == 0 {
			return &Error{Path: "process.args", Reason: "empty: give the runner and its arguments, or leave the field out"}
		}
		for i, a := range p.Args {
			if strings.IndexByte(a, 0) >= 0 {
				return &Error{Path: fmt.Sprintf("process.args[%d]", i), Reason: "contains a NUL byte"}
			}
		}
		if !filepath.IsAbs(p.Args[0]) {
			return &Error{Path: "process.args[0]", Reason: fmt.Sprintf("runner %s is not an absolute path (corral never searches PATH)", bounds.Quote(p.Args[0]))}
		}
		c.Args = slices.Clone(p.Args)
	}
	if has(raw, "env") {
		for i, kv := range p.Env {
			name, _, ok := strings.Cut(kv, "=")
			switch {
			case !ok || name == "":
				return &Error{Path: fmt.Sprintf("process.env[%d]", i), Reason: fmt.Sprintf("%s is not NAME=VALUE", bounds.Quote(kv))}
			case strings.IndexByte(kv, 0) >= 0:
				return &Error{Path: fmt.Sprintf("process.env[%d]", i), Reason: "contains a NUL byte"}
			}
		}
		c.Env, c.EnvSet = append([]string{}, p.Env...), true
	}
	if p.Cwd != "" {
		// An empty cwd (specs-go always writes the field) means "inherit".
		switch {
		case !filepath.IsAbs(p.Cwd):
			return &Error{Path: "process.cwd", Reason: fmt.Sprintf("%s is not an absolute path", bounds.Quote(p.Cwd))}
		case strings.IndexByte(p.Cwd, 0) >= 0:
			return &Error{Path: "process.cwd", Reason: "contains a NUL byte"}
		}
		c.Cwd = p.Cwd
	}
	if p.Capabilities != nil {
		if err := c.capabilities(p.Capabilities); err != nil {
			return err
		}
	}
	if has(raw, "rlimits") {
		list, _ := raw["rlimits"].([]any)
		if err := c.rlimits(p.Rlimits, list); err != nil {
			return err
		}
	}
	if has(raw, "noNewPrivileges") {
		nnp := p.NoNewPrivileges
		c.NoNewPrivs = &nnp
	}
	return nil
}

// capabilities maps the five sets onto Privileges.Keep. corral keeps one
// set in all five (bounding, permitted, effective, inheritable, ambient):
// any difference between the lists would give the runner a capability in
// a set the file left it out of, or take one away it put in, so the lists
// must name the same capabilities. An absent list is an empty one.
func (c *File) capabilities(caps *specs.LinuxCapabilities) error {
	sets := []struct {
		name  string
		names []string
	}{
		{"bounding", caps.Bounding}, {"effective", caps.Effective}, {"inheritable", caps.Inheritable},
		{"permitted", caps.Permitted}, {"ambient", caps.Ambient},
	}
	parsed := make([]map[int]bool, len(sets))
	union := map[int]string{} // capability -> the first set naming it
	for i, set := range sets {
		parsed[i] = map[int]bool{}
		for j, name := range set.names {
			id, err := sandbox.ParseCap(name)
			if err != nil {
				return &Error{Path: fmt.Sprintf("process.capabilities.%s[%d]", set.name, j), Reason: err.Error()}
			}
			parsed[i][id] = true
			if _, ok := union[id]; !ok {
				union[id] = set.name
			}
		}
	}
	keep := make([]int, 0, len(union))
	for id := range union {
		keep = append(keep, id)
	}
	slices.Sort(keep)
	for i, set := range sets {
		for _, id := range keep {
			if !parsed[i][id] {
				return &Error{Path: "process.capabilities." + set.name,
					Reason: fmt.Sprintf("lacks %s, which %s lists: corral keeps one set of capabilities in all five sets, so bounding, effective, inheritable, permitted and ambient must list the same ones",
						sandbox.CapName(id), union[id])}
			}
		}
	}
	c.Keep, c.KeepSet = keep, true
	return nil
}

// rlimits checks each limit; raw is the decoded list, to see which of the
// required soft and hard were actually given.
func (c *File) rlimits(limits []specs.POSIXRlimit, raw []any) error {
	seen := map[int]bool{}
	c.Rlimits = []sandbox.Rlimit{}
	for i, l := range limits {
		path := fmt.Sprintf("process.rlimits[%d]", i)
		res, err := sandbox.RlimitByName(l.Type)
		if err != nil {
			return &Error{Path: path + ".type", Reason: err.Error()}
		}
		if seen[res] {
			return &Error{Path: path + ".type", Reason: fmt.Sprintf("%s is given twice", l.Type)}
		}
		seen[res] = true
		var entry map[string]any
		if i < len(raw) {
			entry, _ = raw[i].(map[string]any)
		}
		for _, field := range []string{"soft", "hard"} {
			if !has(entry, field) {
				return &Error{Path: path + "." + field, Reason: "missing: the runtime spec requires both soft and hard"}
			}
		}
		if l.Soft > l.Hard {
			return &Error{Path: path, Reason: fmt.Sprintf("soft limit %d above hard limit %d", l.Soft, l.Hard)}
		}
		c.Rlimits = append(c.Rlimits, sandbox.Rlimit{Resource: res, Soft: l.Soft, Hard: l.Hard})
	}
	return nil
}

// namespaces maps linux.namespaces. corral's namespace mode always creates
// new pid and mount namespaces, so a list must name both: a list without
// them asks for something corral cannot do (a new network namespace in the
// host's pid namespace, say), and an empty list asks for no namespace at
// all while corral would still create two. Leave linux.namespaces out to
// let --mode decide.
func (c *File) namespaces(list []specs.LinuxNamespace) error {
	if len(list) == 0 {
		return &Error{Path: "linux.namespaces", Reason: "empty: list pid and mount (and more), or leave the field out to let --mode decide"}
	}
	seen := map[specs.LinuxNamespaceType]bool{}
	ns := &c.Namespaces
	for i, n := range list {
		path := fmt.Sprintf("linux.namespaces[%d].type", i)
		if seen[n.Type] {
			return &Error{Path: path, Reason: fmt.Sprintf("%s is given twice", bounds.Quote(string(n.Type)))}
		}
		seen[n.Type] = true
		switch n.Type {
		case specs.PIDNamespace, specs.MountNamespace:
		case specs.UserNamespace:
			ns.User = true
		case specs.NetworkNamespace:
			ns.Net = true
		case specs.IPCNamespace:
			ns.IPC = true
		case specs.UTSNamespace:
			ns.UTS = true
		case specs.CgroupNamespace, specs.TimeNamespace:
			return &Error{Path: path, Unsupported: true,
				Reason: fmt.Sprintf("%s namespace: corral creates pid, mount, user, network, ipc and uts namespaces", n.Type)}
		default:
			return &Error{Path: path, Reason: fmt.Sprintf("unknown namespace type %s: want pid, mount, user, network, ipc or uts", bounds.Quote(string(n.Type)))}
		}
	}
	for _, need := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.MountNamespace} {
		if !seen[need] {
			return &Error{Path: "linux.namespaces", Reason: fmt.Sprintf("no %s namespace: corral's namespaces always include new pid and mount namespaces; list both, or leave linux.namespaces out to let --mode decide", need)}
		}
	}
	ns.PID = true
	return nil
}

// Apply sets in o what the config sets and leaves the rest of o alone:
// its rlimits replace o's for the same resource, its namespaces add to o's.
// Command-line flags are applied after it, so they win.
func (c *File) Apply(o *sandbox.Options) {
	if len(c.Args) > 0 {
		o.Path, o.Args = c.Args[0], slices.Clone(c.Args)
	}
	if c.EnvSet {
		o.Env = append([]string{}, c.Env...)
	}
	if c.Cwd != "" {
		o.Dir = c.Cwd
	}
	if c.KeepSet {
		o.Privileges.Keep = nil
		if len(c.Keep) > 0 {
			o.Privileges.Keep = slices.Clone(c.Keep)
		}
	}
	if c.NoNewPrivs != nil {
		o.Privileges.AllowNewPrivs = !*c.NoNewPrivs
	}
	for _, rl := range c.Rlimits {
		o.Privileges.Rlimits = sandbox.WithRlimit(o.Privileges.Rlimits, rl)
	}
	if c.ReadOnly {
		o.Privileges.Landlock.ReadOnly = true
	}
	n := &o.Namespaces
	n.Net = n.Net || c.Namespaces.Net
	n.IPC = n.IPC || c.Namespaces.IPC
	n.UTS = n.UTS || c.Namespaces.UTS
	n.User = n.User || c.Namespaces.User
	n.PID = n.PID || c.Namespaces.PID
	if c.Namespaces.Hostname != "" {
		n.Hostname = c.Namespaces.Hostname
	}
}

// Default is the config.json `corral spec` prints: corral's defaults
// and nothing else, so that --config with it changes nothing.
//
//   - no process.args: the runner comes after "--" (a config with args and a
//     "--" runner is a usage error), so the file works with any runner;
//   - no process.env, no process.cwd: the runner inherits both;
//   - empty capability sets and noNewPrivileges true: least privilege;
//   - no process.user: the runner keeps the caller's ids;
//   - no linux.namespaces: listing even pid and mount would force pidns
//     mode and forbid --mode auto's fallback to subreaper, which plain
//     corral allows.
func Default() ([]byte, error) {
	type capabilities struct {
		Bounding    []string `json:"bounding"`
		Effective   []string `json:"effective"`
		Inheritable []string `json:"inheritable"`
		Permitted   []string `json:"permitted"`
		Ambient     []string `json:"ambient"`
	}
	type process struct {
		Capabilities    capabilities        `json:"capabilities"`
		Rlimits         []specs.POSIXRlimit `json:"rlimits"`
		NoNewPrivileges bool                `json:"noNewPrivileges"`
	}
	doc := struct {
		Version string  `json:"ociVersion"`
		Process process `json:"process"`
	}{
		Version: specs.Version,
		Process: process{
			Capabilities:    capabilities{[]string{}, []string{}, []string{}, []string{}, []string{}},
			Rlimits:         []specs.POSIXRlimit{},
			NoNewPrivileges: true,
		},
	}
	data, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
