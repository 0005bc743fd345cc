package stage

import (
	"fmt"
	"slices"

	"github.com/corral-sh/corral/sandbox/internal/plan"
	"golang.org/x/sys/unix"
)

// The one message table between corral's processes. Every message kind is
// listed here once, with who sends it, who receives it and its payload;
// each kind is read at exactly one receive step (Step), and a kind that a
// step does not take, known or not, ends the launch with a setup error
// (status 125) that names it: nothing is skipped.
//
// A stage's socket is an AF_UNIX stream, so a later kind may carry
// descriptors (SCM_RIGHTS) after the start; it is added here like any
// other, with its step.

// Kind is a message's kind byte on the wire (internal/wire frames).
type Kind byte

const (
	MsgInitStart     Kind = 1 + iota // host → init: InitStart
	MsgInitReady                     // init → host: set up, every signal registered; no payload
	MsgInitFailed                    // init → host: Failure
	MsgRunnerStopped                 // init → host, after MsgInitReady in terminal mode: RunnerStopped
	MsgExecStart                     // engine → exec stage: ExecStart
	MsgExecFailed                    // exec stage → engine: Failure (success is EOF: the socket is close-on-exec)
	MsgProbeStart                    // probe → probe child: ProbeStart
	MsgProbeReady                    // probe child → probe: the step worked; no payload
	MsgProbeFailed                   // probe child → probe: Failure
	MsgNetListeners                  // init → host, before MsgInitReady: NetListeners, with their sockets
	MsgPublishDial                   // host → init, after MsgInitReady: PublishDial
	MsgPublishConn                   // init → host, after MsgInitReady: PublishConn, with the socket when it connected
	MsgExecListener                  // exec stage → engine, before its execve: Listener, the runner's seccomp listener
	MsgRefused                       // init → host, after MsgInitReady: Refused, a socket call the engine's checker refused
	MsgPublishState                  // init → host, after MsgInitReady: PublishState, a --publish port's server started or stopped listening
	MsgRelayRoute                    // init → host, after MsgInitReady: RelayRoute, a connect the checker would relay
	MsgRelayRouted                   // host → init, after MsgInitReady: RelayRouted, the answer to a RelayRoute
)

// Role is a process role, as a message names its sender and receiver.
type Role string

const (
	RoleHost       Role = "host side"
	RoleInit       Role = "pidns init"
	RoleEngine     Role = "engine"
	RoleExecStage  Role = "exec stage"
	RoleProbe      Role = "probe"
	RoleProbeChild Role = "probe child"
)

// Message is one row of the table.
type Message struct {
	Kind     Kind
	Name     string
	From, To Role
	// New returns a pointer to a zero payload; nil: the kind has none.
	New func() any
}

// Carrier is a payload that carries descriptors (SCM_RIGHTS) beside its
// bytes: how many, and where the receiver puts them.
type Carrier interface {
	FDCount() int
	Carried() []int // the sender's
	SetFDs(fds []int)
}

var table = [...]Message{
	{MsgInitStart, "InitStart", RoleHost, RoleInit, func() any { return new(InitStart) }},
	{MsgInitReady, "InitReady", RoleInit, RoleHost, nil},
	{MsgInitFailed, "InitFailed", RoleInit, RoleHost, func() any { return new(Failure) }},
	{MsgRunnerStopped, "RunnerStopped", RoleInit, RoleHost, func() any { return new(RunnerStopped) }},
	{MsgExecStart, "ExecStart", RoleEngine, RoleExecStage, func() any { return new(ExecStart) }},
	{MsgExecFailed, "ExecFailed", RoleExecStage, RoleEngine, func() any { return new(Failure) }},
	{MsgProbeStart, "ProbeStart", RoleProbe, RoleProbeChild, func() any { return new(ProbeStart) }},
	{MsgProbeReady, "ProbeReady", RoleProbeChild, RoleProbe, nil},
	{MsgProbeFailed, "ProbeFailed", RoleProbeChild, RoleProbe, func() any { return new(Failure) }},
	{MsgNetListeners, "NetListeners", RoleInit, RoleHost, func() any { return new(NetListeners) }},
	{MsgPublishDial, "PublishDial", RoleHost, RoleInit, func() any { return new(PublishDial) }},
	{MsgPublishConn, "PublishConn", RoleInit, RoleHost, func() any { return new(PublishConn) }},
	{MsgExecListener, "ExecListener", RoleExecStage, RoleEngine, func() any { return new(Listener) }},
	{MsgRefused, "Refused", RoleInit, RoleHost, func() any { return new(Refused) }},
	{MsgPublishState, "PublishState", RoleInit, RoleHost, func() any { return new(PublishState) }},
	{MsgRelayRoute, "RelayRoute", RoleInit, RoleHost, func() any { return new(RelayRoute) }},
	{MsgRelayRouted, "RelayRouted", RoleHost, RoleInit, func() any { return new(RelayRouted) }},
}

// Lookup returns the row of kind k.
func Lookup(k Kind) (Message, bool) {
	for _, m := range table {
		if m.Kind == k {
			return m, true
		}
	}
	return Message{}, false
}

func (k Kind) String() string {
	if m, ok := Lookup(k); ok {
		return m.Name
	}
	return fmt.Sprintf("unknown kind %d", byte(k))
}

// Step is one place where a role reads its link, and the kinds it takes
// there.
type Step int

const (
	StepInitStart    Step = iota // the init reads its start
	StepInitReply                // the host side waits for the init to be ready
	StepInitReports              // the host side follows the init after ready (terminal mode)
	StepExecStart                // the exec stage reads its start
	StepExecReply                // the engine waits for the exec stage's execve
	StepProbeStart               // the probe child reads its start
	StepProbeReply               // the probe waits for the probe child's answer
	StepInitRequests             // the init follows the host side's requests after ready (--publish)
)

type stepInfo struct {
	Role   Role
	Name   string
	Accept []Kind
	// For a stage's start step: the kinds the stage answers with.
	ready, failed Kind
	// For a wait for a stage's answer: the kinds that may come before it,
	// each handed to AwaitReplyWith's interim.
	interim []Kind
}

var steps = [...]stepInfo{
	StepInitStart:    {RoleInit, "the init's start message", []Kind{MsgInitStart}, MsgInitReady, MsgInitFailed, nil},
	StepInitReply:    {RoleHost, "the init's reply", []Kind{MsgInitReady, MsgInitFailed, MsgNetListeners}, 0, 0, []Kind{MsgNetListeners}},
	StepInitReports:  {RoleHost, "the init's reports", []Kind{MsgRunnerStopped, MsgPublishConn, MsgRefused, MsgPublishState, MsgRelayRoute}, 0, 0, nil},
	StepExecStart:    {RoleExecStage, "the exec stage's start message", []Kind{MsgExecStart}, 0, MsgExecFailed, nil},
	StepExecReply:    {RoleEngine, "the exec stage's reply", []Kind{MsgExecFailed, MsgExecListener}, 0, 0, []Kind{MsgExecListener}},
	StepProbeStart:   {RoleProbeChild, "the probe child's start message", []Kind{MsgProbeStart}, MsgProbeReady, MsgProbeFailed, nil},
	StepProbeReply:   {RoleProbe, "the probe child's reply", []Kind{MsgProbeReady, MsgProbeFailed}, 0, 0, nil},
	StepInitRequests: {RoleInit, "the host side's requests", []Kind{MsgPublishDial, MsgRelayRouted}, 0, 0, nil},
}

// Receiver is the role that reads at s.
func (s Step) Receiver() Role { return steps[s].Role }

// Accepts lists the kinds s takes.
func (s Step) Accepts() []Kind { return slices.Clone(steps[s].Accept) }

func (s Step) String() string { return steps[s].Name }

// InitStart is what the pidns init needs: the plan, and what the host side
// decided about this run.
type InitStart struct {
	Plan plan.Plan
	// Terminal is terminal mode: decided by the process the caller's shell
	// waits on (the host side), which the init is told.
	Terminal bool
	// CgroupOwner is the pid the run's cgroup is named after: the host
	// side's, the name an operator sees outside.
	CgroupOwner int
	Mask        unix.Sigset_t // the caller's signal mask, for the runner
	// ModeLine is -v's line naming the mode, in the host side's words: the
	// init says it once its namespaces are set up, so that it comes before
	// every line of the engine's (the runner's pid among them), which the
	// host side, told only "ready", could not promise.
	ModeLine string
}

// ExecStart is what the exec stage needs to become the runner.
type ExecStart struct {
	Path       string
	Args       []string
	Env        []string
	Privileges plan.Privileges
	Mask       unix.Sigset_t
}

// ProbeStart names the one step a probe child tries.
type ProbeStart struct {
	Step string // "namespaces", "proc", "subreaper", "hold" (package probe)
}

// RunnerStopped is the init's report that the runner stopped by Signal;
// Inside says the terminal's foreground group is inside the namespace (one
// outside reads as 0 there), so the host side may note it as the group to
// hand the terminal back to.
type RunnerStopped struct {
	Signal int
	Inside bool
}

// NetListeners are the listening sockets the init made inside the
// runner's network namespace, for the host side to accept on: a socket
// keeps the namespace it was made in, whoever holds it. The proxy's comes
// first when ProxyAddr is set, then one per HostPorts entry, in order,
// then a UDP socket and a TCP listener per Nameservers entry, then one
// listener per Relay entry.
type NetListeners struct {
	ProxyAddr string   // the proxy's address as the runner reaches it; "": no proxy
	HostPorts []uint16 // the --host-port listeners, at 127.0.0.1:PORT inside
	// Nameservers are the addresses (port 53) inside where corral's DNS
	// responder answers the runner's queries.
	Nameservers []string
	// Relay are the relay's listening addresses inside (stage.Relay).
	Relay []string
	FDs   []int `wire:"-"`
}

func (n *NetListeners) FDCount() int {
	c := len(n.HostPorts) + 2*len(n.Nameservers) + len(n.Relay)
	if n.ProxyAddr != "" {
		c++
	}
	return c
}

func (n *NetListeners) Carried() []int   { return n.FDs }
func (n *NetListeners) SetFDs(fds []int) { n.FDs = fds }

// PublishDial asks the init for a socket connected to 127.0.0.1:Port
// inside the runner's namespace, for one connection the host side
// accepted on its --publish listener. ID pairs it with its PublishConn.
type PublishDial struct {
	ID   uint64
	Port uint16
}

// PublishState says whether the runner's server listens on a --publish
// port inside (at 127.0.0.1 or [::1]): the host side listens on the
// host's 127.0.0.1:Port only while it does, so that a connect before the
// server is up is refused rather than accepted and closed. The init sends
// one per change, the first when the server first listens.
type PublishState struct {
	Port      uint16
	Listening bool
}

// PublishConn answers a PublishDial: the connected socket, or the errno of
// the connect (Errno non-zero, no descriptor).
type PublishConn struct {
	ID    uint64
	Errno uint64
	FDs   []int `wire:"-"`
}

func (c *PublishConn) FDCount() int {
	if c.Errno != 0 {
		return 0
	}
	return 1
}

func (c *PublishConn) Carried() []int   { return c.FDs }
func (c *PublishConn) SetFDs(fds []int) { c.FDs = fds }

func (d *PublishDial) SetRequestID(id uint64) { d.ID = id }
func (c *PublishConn) RequestID() uint64      { return c.ID }

// Listener is the runner's seccomp listener (SECCOMP_FILTER_FLAG_NEW_LISTENER),
// made where its filter was installed, for the engine's checker of its
// socket calls (package sockcheck).
type Listener struct {
	FDs []int `wire:"-"`
}

func (l *Listener) FDCount() int     { return 1 }
func (l *Listener) Carried() []int   { return l.FDs }
func (l *Listener) SetFDs(fds []int) { l.FDs = fds }

// RelayRoute asks the host side to decide a TCP connect the runner made
// to Dst, which the engine's checker will make to the relay from Src
// instead (stage.Relay): allowed, the host dials Dst and relays the
// connection that comes from Src to it. ID pairs it with its RelayRouted.
type RelayRoute struct {
	ID       uint64
	Src, Dst string // netip.AddrPort
}

// RelayRouted answers a RelayRoute: whether the policy allows it and,
// when it does, the errno of the host side's dial (0: connected).
type RelayRouted struct {
	ID      uint64
	Allowed bool
	Errno   uint64
}

func (r *RelayRoute) SetRequestID(id uint64) { r.ID = id }
func (r *RelayRouted) RequestID() uint64     { return r.ID }

// Refused is a socket call of the runner's tree that the engine's checker
// refused, for the host side to name (once per destination on stderr, and
// in the connection log). Addr is an IP address and port for a TCP call,
// Path a Unix socket's name; Kind "fs" is a write the filesystem rules
// refused (Path the file), "mount" a sandbox that tried to mount (Path
// its program's name).
type Refused struct {
	Call   string // "connect", "bind", "listen", "sendto"; the system call of an "fs" or "mount"
	Kind   string // "tcp", "unix", "abstract", "udp", "inet", "fs", "mount"
	Addr   string
	Path   string
	Direct bool // past the proxy: a client that ignores the proxy variables
	Reason string
}
