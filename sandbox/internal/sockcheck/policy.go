package sockcheck

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Policy is what the checker enforces: plain data, derived from the run's
// plan by the caller.
type Policy struct {
	// Net: a network policy is on (--net none or --allow-net). A
	// path-bound Unix socket may then be reached only when the tree bound
	// it (through this checker) or AllowUnix names it. Without it only
	// Hide applies (a run with --hide alone).
	Net bool
	// TCP: check TCP addresses (subreaper mode, where the runner shares
	// the host's network). In a namespace mode any address inside the
	// runner's network namespace is fine, and TCP is false.
	TCP bool
	// ProxyAddr is the egress proxy's listening address (zero: none).
	ProxyAddr netip.AddrPort
	// Direct, when set (subreaper mode under --allow-net), is asked of a
	// TCP connect (or a send with an address) that neither the proxy nor
	// a --host-port nor the tree's own bind admits: true has the checker
	// make it on the runner's own socket, as any allowed call. It is
	// called with the address the checker parsed, once, from a worker
	// whose caller waits.
	Direct func(netip.AddrPort) bool
	// DNSTCP and DNSUDP, when valid, are corral's DNS responder on the
	// host's loopback (subreaper mode under --allow-net): a TCP connect
	// to port 53, at any address, is made to DNSTCP instead, and a UDP
	// socket's connect to port 53 to DNSUDP. The runner's resolver then
	// reads its answers from the socket it connected, whose peer it
	// does not check over TCP, and over connected UDP gets from the
	// kernel only what that peer sends.
	DNSTCP, DNSUDP netip.AddrPort
	// Relay, when set (a namespace mode under --allow-net), takes the
	// TCP connects that leave the sandbox's loopback (relay.go).
	Relay Relay
	// HostPorts may be connected to at 127.0.0.1:PORT (--host-port).
	HostPorts []uint16
	// Publish is carried for the caller's convenience and changes
	// nothing: a bind on loopback is allowed on any port, and in
	// subreaper mode the host reaches a published port on the same
	// loopback.
	Publish []uint16
	// AllowUnix are the Unix sockets that may be connected to
	// (--allow-unix). Each must exist when New runs; it is known by
	// device and inode from then on, so a socket re-created at the path
	// later is not the one allowed.
	AllowUnix []string
	// Hide are directories (--hide) beneath which no Unix socket can be
	// connected to, sent to or bound, with or without a network policy.
	Hide []string
	// Metadata: the runner's metadata calls come to the checker too
	// (seccomp RunnerRules.NotifyMetadata; subreaper mode under a
	// filesystem rule), and a change is made only beneath Writable and
	// not beneath Hide.
	Metadata bool
	// Writable are the --writable paths (none under --read-only).
	Writable []string
	// StaticCreds: no thread of the runner's tree can change its
	// credentials (it keeps no capability and runs under no_new_privs),
	// so the checker reads them once (creds.go).
	StaticCreds bool
	// IsolateIPC: an abstract Unix socket may be reached only when the
	// tree bound it (--isolate-ipc).
	IsolateIPC bool
	// Report, when set, is called for every refusal, from the worker
	// that refused (it must not block for long: the worker's caller
	// waits).
	Report func(Refusal)
	// Writes, when set, is what the runner's write-intent filesystem
	// calls are held to (seccomp RunnerRules.NotifyWrites; fswrite.go).
	Writes *WritePolicy
	// ReportFS: the checker only names what the filesystem rules refuse
	// (the write-intent calls, Writes, and the metadata calls) and lets
	// every such call run: namespace modes, where read-only mounts and
	// Landlock enforce whatever the runner swaps a path to after the
	// look (DESIGN.md, "Reporting what the rules refused").
	ReportFS bool
	// Mounts: the calls of a sandbox that mounts come to the checker
	// (seccomp RunnerRules.NotifyMounts), which names the first and lets
	// each run: under a filesystem rule Landlock refuses the mount.
	Mounts bool
	// Workers is how many calls may be checked at once (each worker owns
	// an OS thread from New on); 0 means DefaultWorkers.
	Workers int
}

// DefaultWorkers is the number of workers when Policy.Workers is 0.
const DefaultWorkers = 4

// Refusal is one call the checker refused with EACCES.
type Refusal struct {
	Tid  int    // the calling thread, in the checker's PID namespace
	Call string // "connect", "bind", "listen", "sendto", "socket"; a metadata call's name (chmod...)
	// Kind is "tcp" (an IPv4 or IPv6 address), "unix" (a path),
	// "abstract" (an abstract Unix name), or, for a refused socket(2),
	// "udp" or "inet"; "fs" for a write-intent or metadata call the
	// filesystem rules refuse (Path: the file, as the kernel names it);
	// "mount" for a sandbox that tried to mount (Path: its program's
	// name, Call the call). A refused UDP destination (udp.go) is "udp"
	// with Addr, or "dns" for a DNS query on an unconnected socket, with
	// Path the program that sent it; "internal" for a call corral's
	// checker failed on (Call says which).
	Kind string
	Addr netip.AddrPort // for "tcp": the address asked for
	Path string         // for "unix" and "abstract": the name as given
	// Direct: an attempt to reach past the proxy (a connect or a send
	// to a non-loopback address). The caller names these once per
	// destination: "denied direct connection to ADDR:PORT: clients must
	// use the proxy variables".
	Direct bool
	Reason string
}

type devIno struct {
	dev uint64
	ino uint64
}

// resolved is a Policy with its paths turned into what the checks
// compare: inodes for AllowUnix, clean absolute paths for Hide.
type resolved struct {
	Policy
	allowUnix map[devIno]string
	hide      []string
	writable  []string
	hostPorts map[uint16]bool
	proxy     netip.AddrPort
}

func resolve(p Policy) (*resolved, error) {
	r := &resolved{Policy: p, allowUnix: map[devIno]string{}, hostPorts: map[uint16]bool{}}
	if p.ProxyAddr.IsValid() {
		r.proxy = netip.AddrPortFrom(p.ProxyAddr.Addr().Unmap(), p.ProxyAddr.Port())
	}
	for _, port := range p.HostPorts {
		r.hostPorts[port] = true
	}
	for _, path := range p.AllowUnix {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			return nil, fmt.Errorf("--allow-unix %s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, fmt.Errorf("--allow-unix %s: not a Unix socket", path)
		}
		r.allowUnix[devIno{st.Dev, st.Ino}] = path
	}
	for _, dir := range p.Hide {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("--hide %s: %w", dir, err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		r.hide = append(r.hide, filepath.Clean(abs))
	}
	for _, dir := range p.Writable {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("--writable %s: %w", dir, err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		r.writable = append(r.writable, filepath.Clean(abs))
	}
	return r, nil
}

// writableAt reports whether path (as the kernel names an open file, in
// the checker's view) is a --writable path or beneath one, or a terminal
// of /dev/pts (usable under every policy: a program may fchmod its own
// terminal, as mesg does).
func (r *resolved) writableAt(path string) bool {
	return beneath(path, r.writable) || beneath(path, []string{"/dev/pts"})
}

func beneath(path string, dirs []string) bool {
	for _, h := range dirs {
		if path == h || h == "/" || (len(path) > len(h) && path[:len(h)] == h && path[len(h)] == '/') {
			return true
		}
	}
	return false
}

// hidden reports whether path (as the kernel names an open file, in the
// checker's view) is a hidden directory or beneath one.
func (r *resolved) hidden(path string) bool {
	for _, h := range r.hide {
		if path == h || h == "/" || (len(path) > len(h) && path[:len(h)] == h && path[len(h)] == '/') {
			return true
		}
	}
	return false
}
