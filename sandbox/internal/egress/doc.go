// Package egress is corral's egress proxy and port forwarder: the host
// side's network role. It runs in corral's own process, outside the
// sandbox (the subreaper engine's process, or the pidns host side), never
// in the runner's tree; it serves listening sockets it is handed, wherever
// they were made.
//
// It owns:
//
//   - the --allow-net destinations (ParseRule, Rule) and the decision
//     (Policy): a DNS name is allowed when a name rule matches it and its
//     port and every address it resolves to is public, or covered by an
//     IP/CIDR rule (the SSRF guard); an IP literal only when an IP/CIDR
//     rule covers it and its port. A name is resolved once, with the
//     host's resolver, and only the checked addresses are dialled, so a
//     second answer (DNS rebinding) never reaches a socket;
//   - the proxy (Proxy.Serve): HTTP (CONNECT and absolute-URI requests)
//     and SOCKS5 (CONNECT) on one listener, told apart by the first byte.
//     A refusal is HTTP 403 with the reason in the body and in a
//     Proxy-Status header, or SOCKS reply 2; stderr gets one line per
//     refused destination, not per attempt;
//   - the plain TCP forwards of --host-port and --publish (Proxy.Forward),
//     with an abstract dial so the caller decides where the other end is;
//   - the connection log of --net-log (OpenLog): one JSON line per
//     proxied connection, when it ends. A connection the policy allows but
//     that fails (the name does not resolve, the destination refuses) is
//     logged as "allow" with the failure as the reason; "deny" is only the
//     policy's (or the connection cap's) refusal.
//
// Streams are copied both ways with half-close: when one side finishes
// sending, the other side's write half is shut, so a client that shuts
// down its writing still reads the whole answer, through a pooled buffer
// (not splice(2), whose pipes would hold descriptors). The handshake has a
// deadline (a silent or trickling client is closed); an established tunnel
// has none. Connections are capped (MaxConns, shared by every listener of
// a Proxy), and so is an HTTP header (MaxHeaderBytes).
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
