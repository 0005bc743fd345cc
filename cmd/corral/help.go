//go:build linux

package main

import (
	"strconv"
	"strings"

	"github.com/corral-sh/corral/internal/exitstatus"
)

// helpText is what --help prints. The exit statuses in it are filled in
// from package exitstatus, so that the text cannot disagree with them;
// only when asked, so that a launch does not pay for it.
func helpText() string {
	return strings.NewReplacer(
		"{setup}", strconv.Itoa(exitstatus.Setup),
		"{timeout}", strconv.Itoa(exitstatus.Timeout),
		"{signal}", strconv.Itoa(exitstatus.SignalBase),
		"{notfound}", strconv.Itoa(exitstatus.NotFound),
		"{notexec}", strconv.Itoa(exitstatus.NotExecutable),
		"{usage}", strconv.Itoa(exitstatus.Usage),
	).Replace(helpTemplate)
}

const helpTemplate = `corral runs one command (the runner) inside a process boundary and owns
every process it creates: each descendant, however it detaches, is adopted,
reaped, and killed when the runner ends. The runner's stdio and exit status
pass through untouched; it starts with no capabilities and no_new_privs.

Usage:
  corral [options] -- RUNNER [ARG...]   run RUNNER (an absolute path) contained
  corral probe [--json]                 what this machine allows, and why not
  corral spec                           print a default OCI config.json for --config
  corral version
  corral changes show PATH [--stat]     what an --overlay run changed (A/M/D, diffs)
  corral changes apply PATH [--force]   write it into DIR (refused where DIR changed)
  corral changes discard PATH | list    throw it away; the kept folders, newest first

Options:
  --mode MODE          auto (default), pidns or subreaper  [CORRAL_MODE]
                         pidns:     RUNNER's tree lives in new PID + mount namespaces
                                    (plus a user namespace when unprivileged);
                                    nothing survives, even if corral is SIGKILLed
                         subreaper: corral adopts orphans as a child subreaper in the
                                    current namespaces (or is PID 1 of a container)
                         auto:      pidns where the kernel allows it, else subreaper
  --state PATH         write a JSON state document there (atomic, mode 0600)
                         [CORRAL_STATE_PATH, HERMES_CLI_PROCESS_STATE_PATH]
  --grace SECONDS      teardown grace before SIGKILL, 0 to 30 (default 10)
                         [CORRAL_GRACE_SECONDS, HERMES_CLI_PROCESS_GRACE_SECONDS]
  --poll SECONDS       state refresh interval, 0.01 to 5 (default 0.5)
                         [CORRAL_POLL_SECONDS, HERMES_CLI_PROCESS_POLL_SECONDS]
  --cap-add CAP        keep capability CAP (e.g. NET_BIND_SERVICE); repeatable.
                         SYS_ADMIN, SYS_PTRACE, SYS_MODULE, BPF, NET_ADMIN, SYS_RAWIO
                         and MKNOD undo the sandbox: with any sandbox or network
                         policy option they are a usage error; alone, corral says
                         what each costs
  --allow-new-privs    do not set no_new_privs (setuid programs work again)
  --rlimit NAME=SOFT[:HARD]
                       set a resource limit, e.g. RLIMIT_NOFILE=1024:4096; repeatable
  --config PATH        an OCI runtime-spec config.json (see 'corral spec')
  --settings PATH      options from a JSON file: keys are the long option names
                         ({"allow-net": ["github.com"], "timeout": 5, "read-only":
                         true, "setenv": {"A": "1"}}; relative paths are the
                         file's directory's, ~ is $HOME), or sandbox-runtime's
                         ~/.srt-settings.json (network/filesystem), never weaker;
                         the command line adds to lists, overrides the rest.
                         A regular file of at most 1 MiB, each key once; in
                         srt's domain lists a CIDR is an error (use allow-net);
                         corral warns when it lies beneath a --writable path
                         [CORRAL_SETTINGS]

The runner's environment (after corral's own variables are removed; applied
in this order, and the proxy variables of --allow-net come last):
  --clearenv           start from an empty environment (not even PWD)
  --unsetenv VAR       remove VAR; * matches any run of characters, e.g.
                         --unsetenv 'AWS_*' (case-sensitive); repeatable
  --setenv VAR VALUE   set VAR to VALUE (two arguments, as in bubblewrap; also
                         --setenv=VAR=VALUE); repeatable

Sandbox policy (for RUNNER and everything it starts; a kernel that cannot
enforce what is asked is an error, {setup}, never a run without it):
  --writable PATH      RUNNER may create, change and delete only beneath PATH;
                         elsewhere the filesystem is read-only for it,
                         metadata (chmod, chown, xattrs, times) included;
                         repeatable. Protected even beneath PATH (read-only,
                         not renamed or removed, not created where none was;
                         what appears there anyway is moved aside to
                         NAME.corral-refused):
                         at PATH's top (and $HOME's, when beneath PATH)
                         .gitmodules .bashrc .bash_profile .bash_login .profile
                         .zshrc .zshenv .zprofile .envrc .vscode/ .idea/
                         .husky/ .mcp.json .claude/settings*.json
                         .gemini/settings.json .codex/config.toml and the
                         --settings file; in PATH's git repository .git itself
                         (never renamed or removed), .git/hooks/, .git/config,
                         .git/modules/*/hooks/ and */config, and the folder
                         core.hooksPath names (objects, refs, index and logs
                         stay writable). A --writable naming one of them
                         re-grants it alone
  --overlay DIR        RUNNER gets DIR writable beneath, but every change goes
                         to a layer of corral's, never to DIR; at the end
                         corral names the changes folder for corral changes
                         show|apply|discard|list (namespace modes);
                         repeatable
  --changes PATH       where --overlay keeps the changes (a new folder;
                         default: under $XDG_STATE_HOME/corral/changes)
  --read-only          nothing is writable but /dev/null, /dev/zero, /dev/full
                         and the terminals
  --hide PATH          no access at all beneath PATH, which wins over
                         --writable; its ancestors cannot be listed; repeatable
  --isolate-ipc        RUNNER's tree cannot signal any process outside it
                         (corral included) nor connect to an abstract Unix
                         socket outside it (Landlock ABI 6, Linux 6.12).
                         Implied by every filesystem or network policy
                         option, held another way on older kernels
  A runner of uid 0 owns root's files: give a network or IPC policy with
  --writable or --read-only, or it can change what root runs later (corral
  says so). Under a filesystem rule a sandbox that mounts (bubblewrap, and
  codex's, Claude Code's and sandbox-runtime's Linux sandboxes) cannot
  start: Landlock forbids mounts, and corral names the program that tried;
  under a network policy alone it can. Every write the rules refuse is
  named on stderr (once per path, 20 paths at most), and a run with
  refusals ends with one line saying what was refused and which option
  would allow it.
  --timeout SECONDS    after SECONDS cancel the run as by SIGTERM, then exit {timeout};
                         above 0 and at most 31536000 (a year), fractions
                         allowed  [CORRAL_TIMEOUT_SECONDS]
  --die-with-parent    cancel the run as by SIGTERM when corral's parent exits

Network policy (every mode; fails closed like the sandbox policy):
  --net MODE           host (default) or none: nothing but loopback (pidns: a
                         network namespace; subreaper: a socket filter); in
                         every mode no vsock, and no Unix socket but the
                         tree's own and --allow-unix  [CORRAL_NET]
  --allow-net DEST     only DEST through corral's egress proxy (HTTP_PROXY,
                         HTTPS_PROXY, ALL_PROXY are set): HOST[:PORT] with a
                         name, *.wildcard, IP or CIDR, PORT 1-65535 or *
                         (default 80 and 443); names resolving to private or
                         loopback addresses need an IP entry; repeatable
                         [CORRAL_ALLOW_NET, comma-separated]
  --deny-net DEST      refuse DEST even where --allow-net admits it (same
                         syntax; without a port, every port); needs --allow-net;
                         repeatable
  --no-proxy-env       with --allow-net, set no proxy variables and keep the
                         caller's NO_PROXY: clients connect directly, which
                         subreaper mode decides by the same entries (pidns
                         mode reaches nothing that way)
  --allow-unix PATH    the runner may connect to the Unix socket at PATH (must
                         exist); needs --net none or --allow-net; repeatable
  --host-port PORT     the host's 127.0.0.1:PORT is reachable inside at
                         127.0.0.1:PORT (a database); repeatable
  --publish PORT       the runner's server on 127.0.0.1:PORT is reachable
                         from the host at 127.0.0.1:PORT; repeatable
  --log PATH           the run's policy log, JSON lines (mode 0600): each
                         connection's decision at once, its end with bytes
                         and duration, refused direct attempts, each
                         refused write (event "fs"); with any policy
                         option; also --net-log  [CORRAL_LOG,
                         CORRAL_NET_LOG]

  -v, --verbose        say which mode was chosen and why, and what teardown did
                         [CORRAL_VERBOSE]
  -h, --help           this text

An environment value that does not parse means the default; one out of range
is clamped. corral removes these variables from RUNNER's environment.

Signals: SIGTERM, SIGINT and SIGQUIT cancel the run (forwarded to the whole
tree; a second one skips the rest of the grace); other signals, SIGHUP
included, go to RUNNER alone. A signal ignored when corral starts stays
ignored.

Exit status: RUNNER's own; {signal}+N if it was killed by signal N; {notfound} if RUNNER
was not found and {notexec} if it could not be executed ("runner exec failed");
{usage} for a usage error; {setup} if corral's own setup failed; {timeout} if --timeout
ended the run.

Examples:
  corral --state /tmp/state.json -- /bin/sh -c 'sleep 100 & echo started'
  corral --writable "$PWD" --hide ~/.ssh --timeout 3600 -- /usr/bin/make test
  corral --allow-net api.github.com --log net.log -- /usr/bin/git fetch
  corral --settings ~/.srt-settings.json --clearenv --setenv HOME "$HOME" -- /usr/bin/npm test
`
