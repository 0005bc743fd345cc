// Package egress is corral's egress proxy and port forwarder: the host
// side's network role. It runs in corral's own process, outside the
// sandbox (the subreaper engine's process, or the pidns host side), never
// in the runner's tree; it serves listening sockets it is handed, wherever
// they were made.
//
// It owns:
//
//   - the --allow-net and --deny-net destinations (ParseRule,
//     ParseDenyRule, Rule) and the decision (Policy): a DNS name is
//     allowed when a name rule matches it and its port, no deny rule
//     matches it or an address it resolves to, and every address it
//     resolves to is public or covered by an IP/CIDR rule (the SSRF guard:
//     an IPv6 address carrying an IPv4 one is judged by that one too, and
//     the host's own interface addresses, read when the Proxy is made, are
//     local); an IP literal only when an IP/CIDR rule covers it and its
//     port and no deny rule does. A name is resolved once, and only the
//     checked addresses are dialled, so a second answer (DNS rebinding)
//     never reaches a socket;
//   - the resolver (LaunchResolver): the hosts file and resolv.conf read
//     when the Proxy is made, before the runner exists, and DNS asked
//     directly (golang.org/x/net/dns/dnsmessage), so nothing the runner
//     writes to /etc/hosts or /etc/resolv.conf afterwards steers a name;
//   - the proxy (Proxy.Serve): HTTP (CONNECT and absolute-URI requests)
//     and SOCKS5 (CONNECT) on one listener, told apart by the first byte,
//     answering only the run's credentials (Userinfo: a random user and
//     password per Proxy; HTTP Basic Proxy-Authorization, else 407; SOCKS5
//     username/password, RFC 1929). A refusal is HTTP 403 with the reason
//     in the body and in a Proxy-Status header, or SOCKS reply 2; stderr
//     gets one line per refused destination, not per attempt;
//   - the namespace modes' transparent egress (relay.go): the DNS
//     responder on sockets made inside the runner's namespace
//     (ServeDNSOn), and the relay (RelayRoute decides a connect the
//     engine's checker routes to it and notes its source; ServeRelay
//     dials the decided address for the connection from that source);
//   - the plain TCP forwards of --host-port and --publish (Proxy.Forward),
//     with an abstract dial so the caller decides where the other end is;
//   - the connection log of --net-log (OpenLog): a decision line for every
//     attempt, written with one write(2) the moment it is decided (for an
//     allowed one, once dialled, naming the address), and an end line with
//     the payload bytes when an allowed one closes; ids increase per run.
//     Forwards are logged the same way, and Proxy.Direct logs a direct
//     attempt refused elsewhere (and names it once on stderr). Attempts
//     refused before a destination is known (malformed, without the
//     credentials) or over the cap are logged at most 10 a second, with a
//     count of those left out. A connection the policy allows but that
//     fails (the name does not resolve, the destination refuses) is
//     "allow" with the failure as the reason; "deny" is only the policy's,
//     the credentials' or the connection cap's refusal.
//
// Streams are copied both ways with half-close: when one side finishes
// sending, the other side's write half is shut, so a client that shuts
// down its writing still reads the whole answer. A tunnel copies with
// splice(2) through a pipe per direction that it owns and closes with
// itself (Go's own splice path borrows pipes only the garbage collector
// gives back), so descriptors stay bounded by MaxConns; where no pipe can
// be made (EMFILE), and for plain HTTP requests, through a pooled buffer.
// The handshake has a
// deadline (a silent or trickling client is closed); an established tunnel
// has none. Connections are capped (MaxConns, shared by every listener of
// a Proxy), and so is an HTTP header (MaxHeaderBytes). A proxy connection
// takes its place only once its credentials and request are read; until
// then it holds one of MaxConns handshake places, the oldest of which is
// closed to make room for a new one, so clients without the credentials
// cannot keep the runner's connections out.
//
// The listener passed to Serve is typically made by the init inside the
// runner's network namespace and passed out over the stage socket: a
// socket keeps the namespace it was created in, so the runner can reach
// it, while the proxy's dials leave from the host's namespace. Nothing in
// this package knows about namespaces.
//
// Close ends everything: listeners, both sides of every connection, and
// every goroutine, before it returns; nothing the proxy holds delays
// corral's exit. Writes to Config.Stderr are the one thing a Proxy cannot
// bound: give it a writer that does not block forever (corral's own
// stderr).
package egress
