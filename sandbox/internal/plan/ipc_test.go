package plan

import (
	"testing"

	"github.com/corral-sh/corral/internal/landlock"
	"github.com/corral-sh/corral/internal/seccomp"
)

// Every filesystem or network policy implies IPC isolation: the scopes
// where the kernel has them, the guard and the checker's abstract names
// where not; never for --timeout, --die-with-parent or --cap-add alone.
func TestWithImpliedIPC(t *testing.T) {
	guard := seccomp.EnforcerGuard{PID: 100, PGID: 90}
	for _, tc := range []struct {
		name   string
		plan   Plan
		policy bool
	}{
		{"plain", Plan{}, false},
		{"timeout", Plan{Timeout: 1, DieWithParent: true, Privileges: Privileges{Keep: []int{1}}}, false},
		{"net-none", Plan{Namespaces: Namespaces{Net: true}}, true},
		{"allow-net", Plan{Net: Network{Allow: []string{"example.test"}}}, true},
		{"writable", Plan{Privileges: Privileges{Landlock: landlock.Policy{Writable: []string{"/tmp"}}}}, true},
		{"read-only", Plan{Privileges: Privileges{Landlock: landlock.Policy{ReadOnly: true}}}, true},
		{"hide", Plan{Privileges: Privileges{Landlock: landlock.Policy{Hide: []string{"/srv"}}}}, true},
	} {
		scoped := tc.plan.WithImpliedIPC(true, guard)
		fallback := tc.plan.WithImpliedIPC(false, guard)
		if !tc.policy {
			if scoped.Privileges.DenyIOURing || scoped.Privileges.Landlock.IsolateIPC || fallback.Privileges.Guard != nil || fallback.Privileges.DenyIOURing {
				t.Errorf("%s: no policy, yet isolated: %+v %+v", tc.name, scoped.Privileges, fallback.Privileges)
			}
			continue
		}
		if !scoped.Privileges.Landlock.IsolateIPC || !scoped.Privileges.ImpliedIPC || scoped.Privileges.Guard != nil || !scoped.Privileges.DenyIOURing {
			t.Errorf("%s with scopes: %+v", tc.name, scoped.Privileges)
		}
		if fallback.Privileges.Landlock.IsolateIPC || fallback.Privileges.Guard == nil || *fallback.Privileges.Guard != guard ||
			!fallback.Privileges.DenyIOURing || !fallback.IsolatesAbstract() {
			t.Errorf("%s without scopes: %+v", tc.name, fallback.Privileges)
		}
		// The checker runs for the fallback in every mode; from inside a
		// new PID namespace the guard names no corral process.
		sub, _, _ := fallback.ForSubreaper(Subreaper{})
		pid := fallback.ForPidns("")
		if !sub.Privileges.Notify || !pid.Privileges.Notify {
			t.Errorf("%s: the fallback has no checker: subreaper %v, pidns %v", tc.name, sub.Privileges.Notify, pid.Privileges.Notify)
		}
		if pid.Privileges.Guard == nil || *pid.Privileges.Guard != (seccomp.EnforcerGuard{}) || *sub.Privileges.Guard != guard {
			t.Errorf("%s: guard subreaper %+v, pidns %+v", tc.name, sub.Privileges.Guard, pid.Privileges.Guard)
		}
	}
	// An explicit --isolate-ipc is Landlock's alone (125 without scopes).
	explicit := Plan{Privileges: Privileges{Landlock: landlock.Policy{IsolateIPC: true}}}.WithImpliedIPC(false, guard)
	if explicit.Privileges.Guard != nil || !explicit.Privileges.Landlock.IsolateIPC || explicit.Privileges.ImpliedIPC {
		t.Errorf("explicit --isolate-ipc: %+v", explicit.Privileges)
	}
}
