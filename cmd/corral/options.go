//go:build linux

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

	"github.com/corral-sh/corral/cmd/corral/internal/ociconfig"
	"github.com/corral-sh/corral/internal/bounds"
	"github.com/corral-sh/corral/sandbox"
)

var errHelp = errors.New("help requested")

// Bounds of the timing options (docs/usage.md).
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

// parseRunNoted is parseRun, and also returns what -v should say about
// the values used: a grace clamped from 45 to 30, an environment value
// that did not parse.
func parseRunNoted(args []string, lookup func(string) (string, bool)) (sandbox.Options, []string, error) {
	o, notes, _, err := parseRunWarned(args, lookup)
	return o, notes, err
}

// parseRunWarned is parseRunNoted, and also returns the warnings corral
// prints whether or not -v is given: a settings file the runner could
// rewrite.
func parseRunWarned(args []string, lookup func(string) (string, bool)) (sandbox.Options, []string, []string, error) {
	var notes, warnings []string
	o, err := parseRunWith(args, lookup, &notes, &warnings)
	return o, notes, warnings, err
}

// runFlags are the command line's flags, as parsed.
type runFlags struct {
	fs                           *flag.FlagSet
	set                          map[string]bool // the flags given
	mode, state, grace, poll     string
	configPath, settingsPath     string
	settingsUsed, settingsFrom   string // the settings file read, and how it was named ("--settings PATH")
	capAdd, rlimits              listFlag
	allowNewPrivs, verbose, help bool
	policy                       *policyFlags
	network                      *netFlags
	env                          *envFlags
}

// parseRunWith parses a run's command line into Options, one step after
// another; each step reads flags (and the environment through lookup) and
// sets its part of the Options.
func parseRunWith(args []string, lookup func(string) (string, bool), notes, warnings *[]string) (sandbox.Options, error) {
	f, err := parseFlags(args, lookup)
	if err != nil {
		return sandbox.Options{}, err
	}
	var o sandbox.Options
	if f.settingsUsed != "" {
		o.SettingsFiles = []string{f.settingsUsed} // protected beneath --writable
	}
	// The config file comes first: every flag given on the command line
	// then overrides what it set.
	cfg, err := f.applyConfig(&o)
	if err != nil {
		return o, err
	}
	for _, step := range []func(*sandbox.Options, func(string) (string, bool), *[]string) error{
		f.applyMode, f.applyTiming, f.applyOutput, f.applyPrivileges,
	} {
		if err := step(&o, lookup, notes); err != nil {
			return o, err
		}
	}
	if err := f.policy.apply(&o, f.set, lookup); err != nil { // policy.go
		return o, err
	}
	// The settings file is protected beneath a writable path (protect.go).
	if err := f.network.apply(&o, f.set, lookup); err != nil { // network.go
		return o, err
	}
	if err := f.applyCommand(&o, cfg, lookup); err != nil {
		return o, err
	}
	if err := f.env.apply(&o); err != nil { // env.go
		return o, err
	}
	// The one check of what the options mean together (a usage error
	// names the flag); a *sandbox.SetupError it returns is Launch's to
	// report, with status 125.
	var setup *sandbox.SetupError
	if err := o.Check(); err != nil && !errors.As(err, &setup) {
		return o, f.network.named(err)
	}
	if f.settingsUsed != "" {
		if w := writableOver(f.settingsUsed, o.Privileges.Landlock.Writable); w != "" { // settingsinput.go
			*warnings = append(*warnings, fmt.Sprintf("warning: %s lies beneath the writable path %s: corral keeps it read-only for this run, but a run that may write there without it (another tool, an older corral) could rewrite it for the next; keep it outside every --writable path",
				f.settingsFrom, w))
		}
	}
	return o, nil
}

// parseFlags parses args, after the values of a --settings file (or
// CORRAL_SETTINGS) when there is one: the file's values come first, so
// the command line adds to a repeatable option and overrides any other.
func parseFlags(args []string, lookup func(string) (string, bool)) (*runFlags, error) {
	f, err := parseCommandLine(args)
	if err != nil {
		return nil, err
	}
	path, from := f.settingsPath, "--settings "+f.settingsPath
	if !f.set["settings"] {
		path, _ = firstEnv(envSettings, lookup)
		from = envSettings[0] + "=" + path
	}
	if path == "" {
		return f, nil
	}
	pre, err := settingsArgs(f.fs, path, lookup) // settings.go
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	if f, err = parseCommandLine(append(pre, args...)); err != nil {
		return nil, err
	}
	f.settingsUsed, f.settingsFrom = path, from
	return f, nil
}

// parseCommandLine parses args and refuses a flag whose value would be
// "--".
func parseCommandLine(args []string) (*runFlags, error) {
	f := &runFlags{fs: flag.NewFlagSet("corral", flag.ContinueOnError), set: map[string]bool{}}
	fs := f.fs
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.mode, "mode", "", "")
	fs.StringVar(&f.state, "state", "", "")
	fs.StringVar(&f.grace, "grace", "", "")
	fs.StringVar(&f.poll, "poll", "", "")
	fs.Var(&f.capAdd, "cap-add", "")
	fs.Var(&f.rlimits, "rlimit", "")
	fs.BoolVar(&f.allowNewPrivs, "allow-new-privs", false, "")
	fs.StringVar(&f.configPath, "config", "", "")
	fs.StringVar(&f.settingsPath, "settings", "", "")
	fs.BoolVar(&f.verbose, "v", false, "")
	fs.BoolVar(&f.verbose, "verbose", false, "")
	fs.BoolVar(&f.help, "h", false, "")
	fs.BoolVar(&f.help, "help", false, "")
	f.policy = registerPolicyFlags(fs) // policy.go
	f.network = registerNetFlags(fs)   // network.go
	f.env = registerEnvFlags(fs)       // env.go
	args, err := joinSetenv(fs, args)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		// The flag package repeats the whole of an unknown flag or a bad
		// boolean: keep a pasted megabyte off the terminal.
		if msg := err.Error(); len(msg) > 160 {
			err = fmt.Errorf("%s... (%d bytes)", msg[:160], len(msg))
		}
		return nil, err
	}
	if f.help {
		return nil, errHelp
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	// "--state -- RUNNER" hands "--" to --state as its value and the
	// runner to nobody: say so rather than write a file named "--".
	for _, v := range []struct{ name, value string }{
		{"mode", f.mode}, {"state", f.state}, {"grace", f.grace}, {"poll", f.poll}, {"net", f.network.mode}, {"net-log", f.network.logPath}, {"log", f.network.logPath}, {"config", f.configPath}, {"settings", f.settingsPath},
	} {
		if f.set[v.name] && v.value == "--" {
			return nil, fmt.Errorf("--%s needs a value, but the next argument is \"--\"", v.name)
		}
	}
	for _, v := range []struct {
		name   string
		values listFlag
	}{{"cap-add", f.capAdd}, {"rlimit", f.rlimits}, {"allow-net", f.network.allow}, {"host-port", f.network.hostPorts}, {"publish", f.network.publish},
		{"deny-net", f.network.deny}, {"allow-unix", f.network.allowUnix}, {"unsetenv", f.env.unset}} {
		if slices.Contains(v.values, "--") {
			return nil, fmt.Errorf("--%s needs a value, but the next argument is \"--\"", v.name)
		}
	}
	return f, nil
}

// applyConfig loads --config into o; nil without one.
func (f *runFlags) applyConfig(o *sandbox.Options) (*ociconfig.File, error) {
	if !f.set["config"] {
		return nil, nil
	}
	cfg, err := ociconfig.Load(f.configPath)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", f.configPath, err)
	}
	cfg.Apply(o)
	return cfg, nil
}

// applyMode: --mode, else CORRAL_MODE (an unknown value there is auto),
// else auto.
func (f *runFlags) applyMode(o *sandbox.Options, lookup func(string) (string, bool), _ *[]string) error {
	var err error
	if f.set["mode"] {
		if o.Mode, err = sandbox.ParseMode(f.mode); err != nil {
			return fmt.Errorf("--mode: %w", err)
		}
	} else if m, ok := firstEnv(envMode, lookup); ok {
		if o.Mode, err = sandbox.ParseMode(m); err != nil {
			o.Mode = sandbox.ModeAuto
		}
	} else {
		o.Mode = sandbox.ModeAuto
	}
	return nil
}

// applyTiming: --grace and --poll, bounded, with a note when one was
// brought into bounds.
func (f *runFlags) applyTiming(o *sandbox.Options, lookup func(string) (string, bool), notes *[]string) error {
	graceSeconds, note, err := bounds.FloatNoted(f.grace, f.set["grace"], envGrace, lookup, graceDefault, graceMin, graceMax)
	if err != nil {
		return fmt.Errorf("--grace: %w", err)
	}
	if note != "" {
		*notes = append(*notes, flagNote(f.set["grace"], "--grace ", note))
	}
	pollSeconds, note, err := bounds.FloatNoted(f.poll, f.set["poll"], envPoll, lookup, pollDefault, pollMin, pollMax)
	if err != nil {
		return fmt.Errorf("--poll: %w", err)
	}
	if note != "" {
		*notes = append(*notes, flagNote(f.set["poll"], "--poll ", note))
	}
	o.Grace, o.Poll = bounds.Seconds(graceSeconds), bounds.Seconds(pollSeconds)
	return nil
}

// applyOutput: --state and -v, each with its environment variable.
func (f *runFlags) applyOutput(o *sandbox.Options, lookup func(string) (string, bool), _ *[]string) error {
	o.StatePath = f.state
	if !f.set["state"] {
		o.StatePath, _ = firstEnv(envState, lookup)
	}
	o.Verbose = f.verbose
	if v, ok := firstEnv(envVerbose, lookup); ok && !f.set["v"] && !f.set["verbose"] {
		o.Verbose = bounds.Bool(v)
	}
	return nil
}

// applyPrivileges: --cap-add (which replaces the config's capabilities),
// --allow-new-privs and --rlimit (which replaces a limit on the same
// resource).
func (f *runFlags) applyPrivileges(o *sandbox.Options, _ func(string) (string, bool), _ *[]string) error {
	if len(f.capAdd) > 0 {
		o.Privileges.Keep = nil // replaces the config's capabilities
	}
	for _, name := range f.capAdd {
		c, err := sandbox.ParseCap(name)
		if err != nil {
			return fmt.Errorf("--cap-add: %w", err)
		}
		o.Privileges.Keep = append(o.Privileges.Keep, c)
	}
	if f.allowNewPrivs {
		o.Privileges.AllowNewPrivs = true
	}
	for _, text := range f.rlimits {
		rl, err := sandbox.ParseRlimit(text)
		if err != nil {
			return fmt.Errorf("--rlimit: %w", err)
		}
		o.Privileges.Rlimits = sandbox.WithRlimit(o.Privileges.Rlimits, rl)
	}
	return nil
}

// applyCommand: the runner after --, or process.args of --config (one of
// them), absolute; and its environment.
func (f *runFlags) applyCommand(o *sandbox.Options, cfg *ociconfig.File, lookup func(string) (string, bool)) error {
	command := f.fs.Args()
	switch {
	case cfg != nil && cfg.Args != nil && len(command) > 0:
		return fmt.Errorf("--config %s sets process.args and a runner follows --: give one of them", f.configPath)
	case cfg != nil && cfg.Args != nil:
		command = cfg.Args // checked absolute by ociconfig.Parse
	case len(command) == 0:
		return errors.New("no runner given: corral [options] -- RUNNER [ARG...], or process.args in --config")
	}
	if !filepath.IsAbs(command[0]) {
		return relativeRunnerError(command[0], lookup)
	}
	o.Path, o.Args = command[0], command
	if cfg == nil || !cfg.EnvSet {
		o.Env = runnerEnv(os.Environ())
	}
	return nil
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
	for _, names := range [][]string{envMode, envState, envGrace, envPoll, envVerbose, envTimeout, envNet, envAllowNet, envNetLog, envSettings} {
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
