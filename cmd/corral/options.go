package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/cmd/corral/internal/ociconfig"
	"github.com/corral-sh/corral/sandbox"
)

var errHelp = errors.New("help requested")

// Bounds of the timing options (SPEC: Command line).
const (
	graceDefault, graceMin, graceMax = 10.0, 0.0, 30.0
	pollDefault, pollMin, pollMax    = 0.5, 0.01, 5.0
)

// Environment variables, in precedence order; corral removes all of them
// from the runner's environment.
var (
	envMode    = []string{"CORRAL_MODE"}
	envState   = []string{"CORRAL_STATE_PATH", "HERMES_CLI_PROCESS_STATE_PATH"}
	envGrace   = []string{"CORRAL_GRACE_SECONDS", "HERMES_CLI_PROCESS_GRACE_SECONDS"}
	envPoll    = []string{"CORRAL_POLL_SECONDS", "HERMES_CLI_PROCESS_POLL_SECONDS"}
	envVerbose = []string{"CORRAL_VERBOSE"}
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseRun turns the command line and environment into launch options.
// Flags are strict (a malformed value is a usage error); environment
// values are lenient (a malformed one means the default).
func parseRun(args []string, lookup func(string) (string, bool)) (sandbox.Options, error) {
	o, _, err := parseRunNoted(args, lookup)
	return o, err
}

// parseRunNoted is parseRun, and also returns what -v should say about
// the values used: a grace clamped from 45 to 30, an environment value
// that did not parse.
func parseRunNoted(args []string, lookup func(string) (string, bool)) (sandbox.Options, []string, error) {
	var notes []string
	o, err := parseRunWith(args, lookup, &notes)
	return o, notes, err
}

func parseRunWith(args []string, lookup func(string) (string, bool), notes *[]string) (sandbox.Options, error) {
	fs := flag.NewFlagSet("corral", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		mode, state, grace, poll, net string
		configPath                    string
		capAdd, rlimits               listFlag
		allowNewPrivs, verbose, help  bool
	)
	fs.StringVar(&mode, "mode", "", "")
	fs.StringVar(&state, "state", "", "")
	fs.StringVar(&grace, "grace", "", "")
	fs.StringVar(&poll, "poll", "", "")
	fs.StringVar(&net, "net", "host", "")
	fs.Var(&capAdd, "cap-add", "")
	fs.Var(&rlimits, "rlimit", "")
	fs.BoolVar(&allowNewPrivs, "allow-new-privs", false, "")
	fs.StringVar(&configPath, "config", "", "")
	fs.BoolVar(&verbose, "v", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.BoolVar(&help, "h", false, "")
	fs.BoolVar(&help, "help", false, "")
	policy := registerPolicyFlags(fs) // policy.go
	if err := fs.Parse(args); err != nil {
		// The flag package repeats the whole of an unknown flag or a bad
		// boolean: keep a pasted megabyte off the terminal.
		if msg := err.Error(); len(msg) > 160 {
			err = fmt.Errorf("%s... (%d bytes)", msg[:160], len(msg))
		}
		return sandbox.Options{}, err
	}
	if help {
		return sandbox.Options{}, errHelp
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// "--state -- RUNNER" hands "--" to --state as its value and the
	// runner to nobody: say so rather than write a file named "--".
	for _, f := range []struct{ name, value string }{
		{"mode", mode}, {"state", state}, {"grace", grace}, {"poll", poll}, {"net", net}, {"config", configPath},
	} {
		if set[f.name] && f.value == "--" {
			return sandbox.Options{}, fmt.Errorf("--%s needs a value, but the next argument is \"--\"", f.name)
		}
	}
	for _, f := range []struct {
		name   string
		values listFlag
	}{{"cap-add", capAdd}, {"rlimit", rlimits}} {
		if slices.Contains(f.values, "--") {
			return sandbox.Options{}, fmt.Errorf("--%s needs a value, but the next argument is \"--\"", f.name)
		}
	}

	var o sandbox.Options
	var err error
	// The config file comes first: every flag given on the command line
	// then overrides what it set.
	var cfg *ociconfig.File
	if set["config"] {
		if cfg, err = ociconfig.Load(configPath); err != nil {
			return o, fmt.Errorf("--config %s: %w", configPath, err)
		}
		cfg.Apply(&o)
	}
	if set["mode"] {
		if o.Mode, err = sandbox.ParseMode(mode); err != nil {
			return o, fmt.Errorf("--mode: %w", err)
		}
	} else if m, ok := firstEnv(envMode, lookup); ok {
		if o.Mode, err = sandbox.ParseMode(m); err != nil {
			o.Mode = sandbox.ModeAuto
		}
	} else {
		o.Mode = sandbox.ModeAuto
	}

	graceSeconds, note, err := bounds.FloatNoted(grace, set["grace"], envGrace, lookup, graceDefault, graceMin, graceMax)
	if err != nil {
		return o, fmt.Errorf("--grace: %w", err)
	}
	if note != "" {
		*notes = append(*notes, flagNote(set["grace"], "--grace ", note))
	}
	pollSeconds, note, err := bounds.FloatNoted(poll, set["poll"], envPoll, lookup, pollDefault, pollMin, pollMax)
	if err != nil {
		return o, fmt.Errorf("--poll: %w", err)
	}
	if note != "" {
		*notes = append(*notes, flagNote(set["poll"], "--poll ", note))
	}
	o.Grace, o.Poll = bounds.Seconds(graceSeconds), bounds.Seconds(pollSeconds)

	o.StatePath = state
	if !set["state"] {
		o.StatePath, _ = firstEnv(envState, lookup)
	}
	o.Verbose = verbose
	if v, ok := firstEnv(envVerbose, lookup); ok && !set["v"] && !set["verbose"] {
		o.Verbose = bounds.Bool(v)
	}

	if len(capAdd) > 0 {
		o.Privileges.Keep = nil // replaces the config's capabilities
	}
	for _, name := range capAdd {
		c, err := sandbox.ParseCap(name)
		if err != nil {
			return o, fmt.Errorf("--cap-add: %w", err)
		}
		o.Privileges.Keep = append(o.Privileges.Keep, c)
	}
	if allowNewPrivs {
		o.Privileges.AllowNewPrivs = true
	}
	for _, text := range rlimits {
		rl, err := sandbox.ParseRlimit(text)
		if err != nil {
			return o, fmt.Errorf("--rlimit: %w", err)
		}
		o.Privileges.Rlimits = sandbox.WithRlimit(o.Privileges.Rlimits, rl)
	}
	switch net {
	case "host":
		if set["net"] {
			o.Namespaces.Net = false // an explicit --net host overrides the config
		}
	case "none":
		o.Namespaces.Net = true
	default:
		return o, fmt.Errorf("--net: unknown value %s: want host or none", bounds.Quote(net))
	}

	if err := policy.apply(&o, set, lookup); err != nil {
		return o, err
	}

	command := fs.Args()
	switch {
	case cfg != nil && cfg.Args != nil && len(command) > 0:
		return o, fmt.Errorf("--config %s sets process.args and a runner follows --: give one of them", configPath)
	case cfg != nil && cfg.Args != nil:
		command = cfg.Args // checked absolute by ociconfig.Parse
	case len(command) == 0:
		return o, errors.New("no runner given: corral [options] -- RUNNER [ARG...], or process.args in --config")
	}
	if !filepath.IsAbs(command[0]) {
		return o, relativeRunnerError(command[0], lookup)
	}
	o.Path, o.Args = command[0], command
	if cfg == nil || !cfg.EnvSet {
		o.Env = runnerEnv(os.Environ())
	}
	return o, nil
}

// relativeRunnerError explains that the runner must be absolute, naming
// the path PATH would give: corral never searches PATH itself, so what
// runs is exactly what the caller wrote.
func relativeRunnerError(name string, lookup func(string) (string, bool)) error {
	msg := fmt.Sprintf("runner %s is not an absolute path", bounds.Quote(name))
	if !strings.Contains(name, "/") {
		if path, ok := lookup("PATH"); ok {
			for _, dir := range filepath.SplitList(path) {
				candidate := filepath.Join(dir, name)
				if filepath.IsAbs(candidate) {
					if _, err := exec.LookPath(candidate); err == nil {
						return fmt.Errorf("%s; did you mean %s?", msg, candidate)
					}
				}
			}
		}
	}
	return errors.New(msg)
}

func firstEnv(names []string, lookup func(string) (string, bool)) (string, bool) {
	for _, n := range names {
		if v, ok := lookup(n); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// runnerEnv is the caller's environment without corral's own settings.
func runnerEnv(environ []string) []string {
	own := map[string]bool{}
	for _, names := range [][]string{envMode, envState, envGrace, envPoll, envVerbose, envTimeout} {
		for _, n := range names {
			own[n] = true
		}
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !own[name] {
			out = append(out, kv)
		}
	}
	return out
}

// flagNote names where a noted value came from: the flag, or (already in
// the note) the environment variable.
func flagNote(fromFlag bool, flagName, note string) string {
	if fromFlag {
		return flagName + note
	}
	return note
}
