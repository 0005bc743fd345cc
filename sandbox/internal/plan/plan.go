package plan

import (
	"time"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
)

// Mode is how the boundary is built.
type Mode string

const (
	ModeAuto      Mode = "auto"
	ModePidns     Mode = "pidns"
	ModeSubreaper Mode = "subreaper"
)

// Plan is one contained run, validated once from the caller's request
// (sandbox.Options) and never changed after: every process of the run
// reads it, the pidns init gets it in InitStart, field by field (every
// exported field crosses, byte for byte, unless tagged `wire:"-"`). What a
// process decides or makes while it runs (the terminal, the cgroup, the
// starter thread) is that process's own state, never written back here.
type Plan struct {
	Mode Mode

	Path string   // the runner, absolute
	Args []string // argv, Args[0] included
	Env  []string // the runner's whole environment
	Dir  string   // working directory; empty: inherited

	Grace     time.Duration
	Poll      time.Duration
	StatePath string

	Privileges Privileges
	Namespaces Namespaces
	// Net is the network policy beyond --net none (Namespaces.Net).
	Net Network

	Verbose bool

	// The sandbox policy beyond Privileges.Landlock.
	Timeout       time.Duration // the engine cancels the run this long after the runner started; 0: never
	DieWithParent bool          // the host side cancels the run when corral's parent exits

	// Overlay are the --overlay DIRs, absolute: the runner gets each
	// writable, every change going to a layer in the changes folder
	// (Changes, --changes; "": a new one under $XDG_STATE_HOME/corral).
	Overlay []string
	Changes string
}

// Privileges are applied to the runner alone, on the thread it is forked or
// exec'd from.
type Privileges struct {
	// Keep are the capabilities kept, in all five sets; nothing else is.
	Keep          []int
	AllowNewPrivs bool
	Rlimits       []Rlimit
	// Sockets limits the socket families and types the runner may create
	// (subreaper mode's network policy); nil: any.
	Sockets *seccomp.SocketRules
	// Landlock is the filesystem and IPC policy (--writable, --read-only,
	// --hide, --isolate-ipc), enforced on the same thread (package runner).
	Landlock landlock.Policy
	// Notify: the runner's socket calls that name an address (connect,
	// bind, listen, sendto) go to the engine's checker (package
	// sockcheck) through a seccomp listener; DenyVsock: AF_VSOCK sockets
	// are refused. Set by each mode's derivation (network.go).
	Notify, DenyVsock bool
	// NotifyWrites: the runner's write-intent filesystem calls go to the
	// checker too, which holds them to the writable paths and Protect
	// (protect.go; WithProtection).
	NotifyWrites bool
	Protect      Protection
	// NotifyMetadata: the runner's metadata calls (chmod, chown, xattrs,
	// times), which no Landlock right covers, go to the same checker,
	// which holds them to the filesystem rules: subreaper mode under
	// --writable, --read-only or --hide (ForSubreaper). The namespace
	// modes hold them with read-only mounts instead.
	NotifyMetadata bool
	// ReportFS: the checker only names what the filesystem rules refuse
	// among the write-intent and metadata calls and lets each run: the
	// namespace modes, whose read-only mounts and Landlock enforce
	// (fsholding.go, withFSReports).
	ReportFS bool
	// NotifyMounts: the calls of a sandbox that mounts go to the checker,
	// which names the first (Landlock refuses every mount under a
	// filesystem rule).
	NotifyMounts bool
	// DenyIOURing: io_uring's calls fail (every policy run, ipc.go).
	DenyIOURing bool
	// ImpliedIPC: Landlock.IsolateIPC was set by the policy's implied
	// isolation (ipc.go), not asked for by name.
	ImpliedIPC bool
	// Guard, on a kernel without Landlock's scopes, refuses SIGKILL and
	// SIGSTOP aimed at corral's processes in the runner's seccomp filter
	// (ipc.go); nil: none.
	Guard *seccomp.EnforcerGuard
	// Mounts: the exec stage makes the runner a mount namespace of its
	// own in which the filesystem rules hold as mounts too: read-only
	// outside the writable paths, hidden paths covered, the existing
	// protected paths (Protect) beneath a writable one read-only
	// (namespace modes, mounts.go).
	Mounts bool
	// Overlays are mounted over their Dir by the exec stage before the
	// rest of the mounts (--overlay; set by the host side).
	Overlays []OverlayMount
}

// Checked reports whether the runner's filter hands calls to the
// engine's checker (and so has a listener).
func (p Privileges) Checked() bool { return p.Notify || p.NotifyMetadata || p.NotifyMounts }

// Network is the network policy of a run beyond --net none
// (docs/network.md). Every part of it cuts the runner off the network
// but for what it names: a network namespace of its own in pidns mode,
// the socket filter and Landlock's TCP ports in subreaper mode.
type Network struct {
	// Allow are the --allow-net destinations as given: the egress proxy
	// on the host side parses them again (package egress), so that what
	// crosses to the init stays plain data.
	Allow []string
	// Deny are the --deny-net destinations as given (egress.ParseDenyRule):
	// a match is refused even where Allow admits it.
	Deny []string
	// AllowUnix are the path-bound Unix sockets the runner may connect to
	// under --net none or --allow-net (--allow-unix), absolute.
	AllowUnix []string
	// HostPorts are TCP services on the host's loopback the runner reaches
	// at 127.0.0.1:PORT (--host-port).
	HostPorts []uint16
	// Publish are TCP ports the runner listens on at 127.0.0.1:PORT that
	// the host reaches at its own 127.0.0.1:PORT (--publish).
	Publish []uint16
	// LogPath is --net-log: one JSON line per proxied connection.
	LogPath string
	// KeepNoProxy: NO_PROXY or no_proxy was given with --setenv, so the
	// runner keeps it beside the proxy variables (a caller's inherited
	// one is dropped: clients would skip the proxy for those hosts).
	KeepNoProxy bool
	// NoProxyEnv (--no-proxy-env): the runner gets no proxy variables,
	// and keeps the caller's NO_PROXY; its clients connect directly,
	// which the engine's checker decides (subreaper mode: on the
	// runner's own socket; a namespace mode: through corral's relay).
	NoProxyEnv bool
	// ProxyAddr is where the runner reaches the egress proxy, set by the
	// host side for the mode it runs (the init listens there in pidns
	// mode); "": none.
	ProxyAddr string
	// TCPChecked: the engine's checker holds TCP connects and binds to
	// their address (subreaper mode, where no network namespace does).
	TCPChecked bool
	// Nameservers are the addresses of the nameservers the resolver read
	// at launch names, set by the host side in a namespace mode under
	// --allow-net: the init puts them on the namespace's loopback and
	// corral's DNS responder answers there (port 53, UDP and TCP), and
	// the runner's TCP connects off loopback go through corral's relay.
	Nameservers []string
}

// Proxy reports whether the run has an egress proxy.
func (n Network) Proxy() bool { return len(n.Allow) > 0 }

// Isolated reports whether the runner's network is cut off: --net none or
// an allowlist (the proxy is then the only way out).
func (p *Plan) Isolated() bool { return p.Namespaces.Net || p.Net.Proxy() }

// Namespaces beyond the PID and mount namespaces pidns mode always makes.
type Namespaces struct {
	Net      bool   // --net none: no network but loopback (a new network namespace in pidns mode)
	IPC      bool   // new System V IPC / POSIX message queue namespace
	UTS      bool   // new hostname namespace
	Hostname string // set in the new UTS namespace
	// User forces a user namespace even for a caller with CAP_SYS_ADMIN.
	User bool
	// PID says the PID and mount namespaces were asked for by name (a
	// --config linux.namespaces list), so subreaper mode cannot honour it.
	PID bool
}

// Any reports whether a namespace was asked for that only pidns mode
// honours. A network namespace is not among them: subreaper mode enforces
// the network policy its own way (docs/network.md).
func (n Namespaces) Any() bool {
	return n.IPC || n.UTS || n.User || n.Hostname != "" || n.PID
}

// OverlayMount is one --overlay DIR as the exec stage mounts it: lower =
// Dir, Upper and Work in the run's changes folder (SPEC, "Copy-on-write
// workspace"). The host side fills them in (package sandbox, overlay.go).
type OverlayMount struct {
	Dir, Upper, Work string
}
