package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Policy is what the runner may touch. The zero Policy restricts nothing.
//
// Filesystem rules are active when any of Writable, ReadOnly or Hide is
// set: then everything is readable and executable except beneath Hide, and
// writable only beneath Writable (nowhere with ReadOnly; everywhere but
// beneath Hide when only Hide is given). Hide wins over Writable and over
// the device exceptions.
//
// Paths must exist; a relative one is taken from the working directory at
// the time of Check or Restrict, and symlinks in them are followed: a rule
// binds what the path leads to when Restrict runs.
type Policy struct {
	Writable   []string // create, modify, rename and delete only beneath these
	ReadOnly   bool     // nothing writable except the device exceptions; excludes Writable
	Hide       []string // no access at all beneath these; wins over Writable
	IsolateIPC bool     // no signals to, and no abstract Unix sockets of, processes outside (ABI 6)
	// Net, when set, limits TCP bind and connect to the ports it lists
	// (ABI 4); nil leaves the network alone. It composes with the
	// filesystem rules in one ruleset, and works without them.
	Net *NetPolicy
}

// NetPolicy is the Landlock half of the network policy in subreaper mode:
// TCP bind(2) and connect(2) fail with EACCES except to the ports listed.
// An empty NetPolicy denies every TCP bind and connect (--net none). With
// the proxy, ConnectTCP holds the proxy's port and the --host-port ports,
// and BindTCP the --publish ports.
//
// Landlock sees ports only: a connect to an allowed port number reaches it
// on any host (the residual the caller documents), and UDP, raw and other
// sockets are untouched (seccomp's SocketRules keep them from being
// created). A port of 0 in BindTCP allows bind(2) to port 0, which the
// kernel turns into a free port of the ephemeral range
// (net.ipv4.ip_local_port_range); without it such a bind fails. The port a
// connect(2) or listen(2) on an unbound socket takes for itself is not a
// bind(2) and no rule governs it.
type NetPolicy struct {
	ConnectTCP []uint16
	BindTCP    []uint16
}

func (p Policy) restrictsFS() bool { return len(p.Writable) > 0 || p.ReadOnly || len(p.Hide) > 0 }

// Active reports whether p restricts anything.
func (p Policy) Active() bool { return p.restrictsFS() || p.IsolateIPC || p.Net != nil }

// NetOnly reports whether p restricts TCP ports and nothing else: no path
// to resolve, no scope.
func (p Policy) NetOnly() bool { return p.Net != nil && !p.restrictsFS() && !p.IsolateIPC }

// PolicyError is a policy that cannot be applied as given: a path that does
// not exist or cannot be used, or options that contradict each other. It is
// the caller's mistake, not the kernel's (a usage error at the command line).
type PolicyError struct {
	Field string // "writable", "hide" or "read-only"
	Path  string // as given; empty when the error is not about one path
	Err   error
}

func (e *PolicyError) Error() string {
	if e.Path == "" {
		return e.Field + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s path %s: %v", e.Field, e.Path, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// Check validates p without restricting anything: every path exists and is
// usable, the options agree, and every directory a hidden path splits can be
// listed. Restrict runs the same checks; Check lets a caller report them as
// usage errors before it starts anything.
func Check(p Policy) error {
	r, err := resolve(p)
	if err != nil {
		return err
	}
	_, err = r.plan()
	return err
}

// resolved is a Policy with every path absolute, symlinks followed, and
// duplicates dropped.
type resolved struct {
	writable []string
	hide     []string
	p        Policy
}

// resolve follows symlinks in the paths given: a rule on a symlink would
// bind nothing (Landlock checks the file an access reaches), and someone
// who hides ~/.aws, a symlink to /data/aws, means the data.
func resolve(p Policy) (resolved, error) {
	r := resolved{p: p}
	if p.ReadOnly && len(p.Writable) > 0 {
		return r, &PolicyError{Field: "read-only", Err: errors.New("cannot be combined with writable paths: read-only means nothing is writable")}
	}
	canon := func(field, path string) (string, error) {
		if path == "" {
			return "", &PolicyError{Field: field, Path: `""`, Err: errors.New("empty path")}
		}
		abs, err := filepath.Abs(path)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", &PolicyError{Field: field, Path: path, Err: err}
		}
		return abs, nil
	}
	for _, w := range p.Writable {
		c, err := canon("writable", w)
		if err != nil {
			return r, err
		}
		r.writable = appendNew(r.writable, c)
	}
	for _, h := range p.Hide {
		c, err := canon("hide", h)
		if err != nil {
			return r, err
		}
		if c == "/" {
			return r, &PolicyError{Field: "hide", Path: h, Err: errors.New("hiding / would hide everything, the command itself included")}
		}
		r.hide = appendNew(r.hide, c)
	}
	return r, nil
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// beneath reports whether path is dir or lies inside it.
func beneath(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// devices stay usable whatever the policy, except beneath a hidden path.
var devices = []struct {
	path   string
	rights uint64
}{
	{"/dev/null", devRW},
	{"/dev/zero", devRW},
	{"/dev/full", devRW},
	// ioctls on a terminal opened by path: a reopened /dev/tty must
	// take tcsetattr, and programs that make a pty (script, tmux, ssh)
	// must drive /dev/ptmx and their /dev/pts/N.
	{"/dev/tty", devTTY},
	{"/dev/ptmx", devTTY},
	{"/dev/pts", devTTY | fsReadDir},
}

// rule is one landlock_add_rule to make: rights beneath path. Rules on the
// same path add up.
type rule struct {
	path   string
	rights uint64
	given  bool // a path the caller named, which must still exist
}

type plan struct {
	rules []rule
	split []string   // directories left without rights of their own
	ports []portRule // TCP ports, in the order first named
}

// portRule is one LANDLOCK_RULE_NET_PORT rule: rights on a TCP port.
type portRule struct {
	port   uint16
	rights uint64
}

// portRules merges the ports of n into one rule a port.
func portRules(n *NetPolicy) []portRule {
	if n == nil {
		return nil
	}
	var out []portRule
	at := map[uint16]int{}
	add := func(ports []uint16, right uint64) {
		for _, p := range ports {
			if i, ok := at[p]; ok {
				out[i].rights |= right
				continue
			}
			at[p] = len(out)
			out = append(out, portRule{port: p, rights: right})
		}
	}
	add(n.ConnectTCP, netConnectTCP)
	add(n.BindTCP, netBindTCP)
	return out
}

// plan lays out the rules. A hidden path H is carved out by granting on
// every entry of each directory between the granted root and H except the
// one leading to H, instead of on the directory itself: Landlock rights
// only ever add up, and a right on a directory covers all beneath it.
func (r resolved) plan() (plan, error) {
	var pl planner
	pl.hide = r.hide
	pl.index = map[string]int{}
	ports := portRules(r.p.Net)
	if !r.p.restrictsFS() {
		return plan{ports: ports}, nil
	}
	switch {
	case len(r.writable) > 0:
		if err := pl.grant("/", readRights, false); err != nil {
			return plan{}, err
		}
		for _, w := range r.writable {
			if err := pl.grant(w, writeRights, true); err != nil {
				return plan{}, err
			}
		}
	case r.p.ReadOnly:
		if err := pl.grant("/", readRights, false); err != nil {
			return plan{}, err
		}
	default: // only hidden paths: everything else stays as it was
		if err := pl.grant("/", readRights|writeRights, false); err != nil {
			return plan{}, err
		}
	}
	for _, d := range devices {
		path, err := filepath.EvalSymlinks(d.path) // /dev/ptmx is often pts/ptmx
		if err != nil {
			continue // a minimal /dev without it: nothing to keep usable
		}
		if err := pl.grant(path, d.rights, false); err != nil {
			return plan{}, err
		}
	}
	return plan{rules: pl.rules, split: pl.split, ports: ports}, nil
}

type planner struct {
	hide  []string
	rules []rule
	index map[string]int
	split []string
}

func (pl *planner) grant(path string, rights uint64, given bool) error {
	for _, h := range pl.hide {
		if beneath(path, h) {
			return nil // hidden wins
		}
	}
	var inside []string
	for _, h := range pl.hide {
		if h != path && beneath(h, path) {
			inside = append(inside, h)
		}
	}
	if len(inside) == 0 {
		if i, ok := pl.index[path]; ok {
			pl.rules[i].rights |= rights
			pl.rules[i].given = pl.rules[i].given || given
			return nil
		}
		pl.index[path] = len(pl.rules)
		pl.rules = append(pl.rules, rule{path: path, rights: rights, given: given})
		return nil
	}
	pl.split = appendNew(pl.split, path)
	entries, err := os.ReadDir(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &PolicyError{Field: "hide", Path: inside[0], Err: fmt.Errorf("cannot list %s to hide what lies beneath it: %w", path, err)}
	}
	for _, e := range entries {
		// A symlink needs no rule: an access through it is checked
		// where it leads.
		if e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		if err := pl.grant(filepath.Join(path, e.Name()), rights, false); err != nil {
			return err
		}
	}
	return nil
}
