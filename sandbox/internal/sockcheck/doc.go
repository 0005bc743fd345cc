// Package sockcheck checks the runner's socket calls by their address:
// the supervisor half of seccomp user notification (internal/seccomp,
// RunnerRules.NotifyAddresses). It runs in the engine's process — corral's
// host process in subreaper mode, the pidns init (which shares the
// runner's mount and network namespace) in pidns mode — and enforces a
// plain-data Policy: in subreaper mode TCP connects only to the proxy's
// address, 127.0.0.1:PORT of each --host-port and loopback addresses the
// tree bound, and TCP binds only on loopback (the any-address made
// loopback); in every mode path-bound Unix sockets only when the tree bound
// them or --allow-unix names them, nothing beneath --hide, and with
// --isolate-ipc abstract names only the tree's. Refusals fail with EACCES
// and are passed to Policy.Report.
//
// # Never running a checked pointer
//
// A thread of the runner can rewrite a sockaddr between any look at it and
// the kernel's, so a checked call is never answered CONTINUE. For each
// notification a worker opens a pidfd for the calling thread, checks that
// the notification is still pending (so the tid is the caller's),
// duplicates the caller's socket (pidfd_getfd), copies the address (and a
// sendto's data) with process_vm_readv, checks the notification again,
// checks the copy, makes the call itself on the duplicate — the same open
// file, so the runner's descriptor is the one connected or bound — with a
// sockaddr it builds from what it parsed, and answers with the result (0,
// -errno, EINPROGRESS for a non-blocking socket, the byte count of a
// sendto). A Unix path is resolved once in the caller's view (beneath
// /proc/TID/root, RESOLVE_IN_ROOT; from /proc/TID/cwd for a relative path;
// no magic links), opened O_PATH, its inode checked, and the connect or
// send goes to /proc/self/fd/N: the inode checked is the inode reached.
// Even listen is made here, since an fd number can be dup2'd onto another
// socket after a look. A call of a family with nothing to check (netlink)
// is still made on the copy: the family itself lies in the pointer.
//
// One call is let run: a bind to a Unix path. Nothing is decided on its
// path (only a courtesy --hide check: the authority beneath --hide is the
// runner's Landlock policy), and made in the caller's context it creates
// a socket file only where the caller may (Landlock's MAKE_SOCK, DAC, its
// root and cwd), and getsockname shows the caller the name it gave. What
// the tree bound is learnt from the socket itself afterwards (sock_diag
// UNIX_DIAG_VFS: the inode the socket is bound to), through a duplicate
// registered before the answer, so a connect that follows at once finds it.
//
// # Metadata calls and the caller's privileges
//
// With Policy.Metadata (subreaper mode under --writable, --read-only or
// --hide) the checker also gets every chmod, chown, xattr and time call,
// which no Landlock right covers (metadata.go): it resolves the object
// once in the caller's view, decides on the file reached, and makes the
// change itself on that open file. Every call it makes on the caller's
// objects, sockets included, carries the caller's fsuid, fsgid, groups,
// umask and effective capabilities, never corral's (creds.go).
//
// # Threads, blocking calls, and what cannot hang corral
//
// New starts Policy.Workers workers (4 by default), each locked to an OS
// thread of its own made then, before the runner exists: checking never
// needs a thread the runtime would have to create under a full pids.max
// (DESIGN.md, Trap 14). Each worker waits for a call in the kernel
// (SECCOMP_IOCTL_NOTIF_RECV, which hands each notification to one waiting
// reader), so a check makes no hop through the Go scheduler; no goroutine
// of the checker sits in the runtime's poller.
//
// A connect or send on a blocking socket can wait (a full backlog, a full
// datagram queue, a handshake). It occupies one worker only, never the
// others, and never longer than 100 ms at a time: the worker sets the
// socket's SO_SNDTIMEO to that slice (the caller's own value is put back,
// and still ends the wait when it would have), and after each slice checks
// that the caller still waits. A caller interrupted by a signal whose call
// restarts (SA_RESTART) comes back as a new notification for the same
// call on the same socket; it takes over the call under way (the worker
// answers it), as the kernel goes on with the same handshake. A caller
// killed, or interrupted for good, frees its worker within a slice. A
// notification that vanishes is not an error (seccomp.ErrGone); addresses
// longer than a sockaddr_storage, negative lengths, bad pointers and bad
// fds get the errno the kernel would give; nothing a runner sends can make
// a worker panic.
//
// # Memory
//
// What the checker keeps per runner action is capped in count and bytes
// (checker.go, maxBound and the caps beside it): a call's data lives in
// its worker's reused buffer, a completed call whose answer found no one
// keeps a digest of it (never the bytes) for at most lostFor, and the sets
// of what the tree bound stop growing (a bind past them is refused). A
// runner's flood of interrupted 4 MiB sends costs corral a few hundred
// bytes each, and nothing past the caps.
//
// # Cost
//
// One checked connect costs two thread wake-ups and about twelve system
// calls more than a plain one; see BenchmarkCheckedConnect. A run without
// a network policy or --hide installs no listener and pays nothing.
package sockcheck
