package test

// A policy run holds against a runner that turns on corral (SPEC.md, the
// --isolate-ipc row and "A policy run holds against a runner that turns on
// corral"; issue 33, findings 3 and 4): every filesystem or network policy
// implies IPC isolation, with Landlock's scopes where the kernel has them
// and, where not (CORRAL_TEST_LANDLOCK_ABI_MAX=5 pretends so), the seccomp
// guard of corral's processes and the checker's abstract names. io_uring
// is refused under every policy.

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// abiKnob makes corral use Landlock as if the kernel had ABI 5 (no scopes).
const abiKnob = "CORRAL_TEST_LANDLOCK_ABI_MAX=5"

// enforcerPolicies are the policies each case runs under.
var enforcerPolicies = []string{"net-none", "writable", "allow-net"}

// policyOpts are corral's options for the policy named, in e.
func policyOpts(e *env, name string) []string {
	switch name {
	case "net-none":
		return []string{"--net", "none"}
	case "writable":
		return []string{"--writable", e.dir}
	case "allow-net":
		return []string{"--allow-net", "example.test"}
	}
	panic(name)
}

// wantLine fails unless out holds the line want.
func wantLine(t *testing.T, res result, want string) {
	t.Helper()
	for _, l := range strings.Split(res.stdout, "\n") {
		if l == want {
			return
		}
	}
	t.Errorf("the runner did not print %q: %v", want, res)
}

// SIGSTOP to corral by every addressing: refused, and --timeout fires.
func TestEnforcerStopRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, knob := range []string{"", abiKnob} {
			for _, pol := range enforcerPolicies[:2] {
				t.Run(fmt.Sprintf("%s/abi-cap=%v", pol, knob != ""), func(t *testing.T) {
					e := newEnv(t, m)
					ops := []string{"kill-parent:19", "tgkill-parent:19", "pidfd-parent:19", "procfd-parent:19", "setsig-parent:19", "kill-group:19", "helper", "sleep"}
					o := append(opts("", "1", "--timeout", "2"), policyOpts(e, pol)...)
					var extra []string
					if knob != "" {
						extra = append(extra, knob)
					}
					res := e.run(e.args(o, e.helper(append([]string{"enforcer"}, ops...)...)), extra...)
					if res.code != 124 {
						t.Fatalf("want --timeout's 124: %v", res)
					}
					if !m.pidns() {
						// corral is the runner's parent: each refused.
						// Landlock's scope refuses F_SETSIG's signal as
						// it goes, not the call.
						refused := ops[:4]
						if knob != "" {
							refused = ops[:5]
						}
						for _, op := range refused {
							wantLine(t, res, op+"=EPERM")
						}
					}
				})
			}
		}
	})
}

// SIGKILL to corral: refused, corral outlives the runner, and a helper in
// a session of its own that ignores SIGTERM does not outlive the run (the
// env's cleanup finds every process that carries the marker).
func TestEnforcerKillRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, knob := range []string{"", abiKnob} {
			for _, pol := range enforcerPolicies[:2] {
				t.Run(fmt.Sprintf("%s/abi-cap=%v", pol, knob != ""), func(t *testing.T) {
					e := newEnv(t, m)
					// kill(0) last: under Landlock's scope it reaches
					// the runner's own domain, and the runner kills
					// itself (corral reports 137); under the guard it is
					// refused.
					ops := []string{"helper", "kill-parent:9", "tgkill-parent:9", "pidfd-parent:9", "procfd-parent:9", "setsig-parent:9", "pidfd-child", "go-kill-child", "kill-group:9"}
					want := 137
					if knob != "" {
						want = 7
					}
					o := append(opts("", "1"), policyOpts(e, pol)...)
					var extra []string
					if knob != "" {
						extra = append(extra, knob)
					}
					res := e.run(e.args(o, e.helper(append([]string{"enforcer", "-code", "7"}, ops...)...)), extra...)
					if res.code != want {
						t.Fatalf("want the runner's status %d, corral alive to report it: %v", want, res)
					}
					if !m.pidns() {
						refused := ops[1:5]
						if knob != "" {
							refused = append(ops[1:6:6], ops[8])
						}
						for _, op := range refused {
							wantLine(t, res, op+"=EPERM")
						}
					}
					// The runner's own children stay its to kill, by
					// pidfd too (Go's os.Process uses one).
					wantLine(t, res, "pidfd-child=ok")
					wantLine(t, res, "go-kill-child=ok")
				})
			}
		}
	})
}

// Without a policy the runner is trusted (SPEC.md): it may signal corral.
func TestEnforcerTrustedWithoutPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0])
	res := e.run(e.args(opts("", "1", "--timeout", "20"), e.helper("enforcer", "kill-parent:0", "pidfd-parent:0", "io-uring")))
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	wantLine(t, res, "kill-parent:0=ok")
	wantLine(t, res, "pidfd-parent:0=ok")
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err != nil || strings.TrimSpace(string(b)) == "0" {
		wantLine(t, res, "io-uring=ok")
	}
}

// abstractListeners binds a stream and a datagram socket to fresh abstract
// names in the test's (the host's) network namespace and returns the
// name's stem: NAME-s and NAME-d.
func abstractListeners(t *testing.T) string {
	t.Helper()
	name := "corral-test-" + randomHex()
	ls, err := net.Listen("unix", "@"+name+"-s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Close() })
	ld, err := net.ListenPacket("unixgram", "@"+name+"-d")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Close() })
	return name
}

// An abstract Unix socket outside the tree cannot be reached under any
// policy; one the tree binds stays usable.
func TestEnforcerAbstractSockets(t *testing.T) {
	name := abstractListeners(t)
	forEachMode(t, func(t *testing.T, m mode) {
		for _, pol := range enforcerPolicies {
			for _, knob := range []string{"", abiKnob} {
				if knob != "" && m.pidns() {
					continue
				}
				t.Run(fmt.Sprintf("%s/abi-cap=%v", pol, knob != ""), func(t *testing.T) {
					e := newEnv(t, m)
					var extra []string
					if knob != "" {
						extra = append(extra, knob)
					}
					res := e.run(e.args(append(opts("", "1"), policyOpts(e, pol)...),
						e.helper("enforcer", "abstract-stream:"+name+"-s", "abstract-dgram:"+name+"-d", "own-abstract")), extra...)
					if res.code != 0 {
						t.Fatalf("%v", res)
					}
					for _, op := range []string{"abstract-stream:" + name + "-s", "abstract-dgram:" + name + "-d"} {
						if strings.Contains(res.stdout, op+"=ok") {
							t.Errorf("the runner reached the host's abstract socket (%s): %v", op, res)
						}
						if !strings.Contains(res.stdout, op+"=") {
							t.Errorf("no result for %s: %v", op, res)
						}
					}
					wantLine(t, res, "own-abstract=ok")
				})
			}
		}
	})
}

// io_uring is refused under a policy, in every mode.
func TestEnforcerIOURing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m)
		for _, pol := range enforcerPolicies {
			res := e.run(e.args(append(opts("", "1"), policyOpts(e, pol)...), e.helper("enforcer", "io-uring")))
			if res.code != 0 {
				t.Fatalf("%s: %v", pol, res)
			}
			wantLine(t, res, "io-uring=ENOSYS")
		}
	})
}

// A plain run installs nothing new: no seccomp listener, no guard, and
// io_uring as the host has it.
func TestEnforcerPlainRunUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0])
	res := e.run(e.args(opts("", "1", "-v"), e.helper("enforcer", "io-uring")))
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	if strings.Contains(res.stderr, "IPC isolation") || strings.Contains(res.stderr, "io_uring refused") {
		t.Errorf("a plain run says it isolates: %v", res)
	}
	if strings.Contains(res.stdout, "io-uring=ENOSYS") {
		if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) == "0" {
			t.Errorf("io_uring refused in a plain run: %v", res)
		}
	}
}

// Without Landlock's scopes a policy run goes on under the fallback, while
// an explicit --isolate-ipc stays the 125 it was (SPEC.md).
func TestEnforcerExplicitIsolateNeedsScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, modes[0])
	res := e.run(e.args(opts("", "1", "--isolate-ipc"), e.helper("exit")), abiKnob)
	wantCode(t, res, 125)
	if !strings.Contains(res.stderr, "needs Landlock ABI 6") {
		t.Errorf("the 125 does not name the ABI: %v", res)
	}
	res = e.run(e.args(opts("", "1", "-v", "--read-only"), e.helper("exit")), abiKnob)
	wantCode(t, res, 0)
	if !strings.Contains(res.stderr, "no scopes") {
		t.Errorf("-v does not name the fallback: %v", res)
	}
}
