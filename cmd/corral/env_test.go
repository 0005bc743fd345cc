package main

import (
	"slices"
	"strings"
	"testing"
)

// --clearenv, then --unsetenv, then --setenv, on the runner's environment
// without corral's own variables; bubblewrap's two-argument --setenv.
func TestEnvironmentPolicy(t *testing.T) {
	t.Setenv("CORRAL_VERBOSE", "1")
	t.Setenv("AWS_SECRET", "s")
	t.Setenv("AWS_REGION", "r")
	t.Setenv("XAWS_", "kept")
	t.Setenv("aws_lower", "kept")
	t.Setenv("KEEP", "k")
	has := func(env []string, kv string) bool { return slices.Contains(env, kv) }
	name := func(env []string, n string) bool {
		return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, n+"=") })
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(env []string) bool
	}{
		{"none", nil, func(e []string) bool { return has(e, "AWS_SECRET=s") && has(e, "KEEP=k") && !name(e, "CORRAL_VERBOSE") }},
		{"setenv two arguments", []string{"--setenv", "A", "1 2"}, func(e []string) bool { return has(e, "A=1 2") && has(e, "KEEP=k") }},
		{"setenv joined", []string{"--setenv=A=x=y"}, func(e []string) bool { return has(e, "A=x=y") }},
		{"setenv single dash", []string{"-setenv", "A", "--"}, nil}, // VALUE "--" is refused below
		{"setenv replaces", []string{"--setenv", "KEEP", "new", "--setenv", "KEEP", "newer"}, func(e []string) bool {
			return has(e, "KEEP=newer") && !has(e, "KEEP=k") && !has(e, "KEEP=new")
		}},
		{"setenv empty value", []string{"--setenv", "E", ""}, func(e []string) bool { return has(e, "E=") }},
		{"setenv a value spelled like a flag", []string{"--setenv", "F", "--net", "--net", "none"}, func(e []string) bool { return has(e, "F=--net") }},
		{"a flag value spelled --setenv", []string{"--state", "--setenv"}, func(e []string) bool { return !name(e, "--setenv") }},
		{"unsetenv glob", []string{"--unsetenv", "AWS_*"}, func(e []string) bool {
			return !name(e, "AWS_SECRET") && !name(e, "AWS_REGION") && has(e, "XAWS_=kept") && has(e, "aws_lower=kept") && has(e, "KEEP=k")
		}},
		{"unsetenv exact", []string{"--unsetenv", "KEEP"}, func(e []string) bool { return !name(e, "KEEP") && has(e, "AWS_SECRET=s") }},
		{"unsetenv inner star", []string{"--unsetenv", "A*_*ET"}, func(e []string) bool { return !name(e, "AWS_SECRET") && has(e, "AWS_REGION=r") }},
		{"setenv after unsetenv", []string{"--setenv", "AWS_REGION", "x", "--unsetenv", "AWS_*"}, func(e []string) bool {
			return has(e, "AWS_REGION=x") && !name(e, "AWS_SECRET")
		}},
		{"clearenv", []string{"--clearenv", "--setenv", "ONLY", "1"}, func(e []string) bool { return slices.Equal(e, []string{"ONLY=1"}) }},
		{"clearenv alone", []string{"--clearenv"}, func(e []string) bool { return len(e) == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseRun(append(tc.args, "--", "/bin/true"), env(nil))
			if tc.check == nil {
				if err == nil {
					t.Fatalf("accepted: env %q", o.Env)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o.Env) {
				t.Errorf("env %q", o.Env)
			}
		})
	}
}

func TestEnvironmentPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--setenv", "A"}, "--setenv needs two arguments"},
		{[]string{"--setenv"}, "--setenv needs two arguments"},
		{[]string{"--setenv", "A", "--"}, "--setenv needs two arguments"},
		{[]string{"--setenv", "A=B", "C"}, "--setenv \"A=B\": not a variable name"},
		{[]string{"--setenv", "", "C"}, "not a variable name"},
		{[]string{"--setenv=A"}, "want VAR VALUE"},
		{[]string{"--unsetenv", ""}, "--unsetenv"},
		{[]string{"--unsetenv", "A=B"}, "--unsetenv"},
		{[]string{"--unsetenv", "--"}, "--unsetenv needs a value"},
	} {
		_, err := parseRun(append(tc.args, "--", "/bin/true"), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "ANY", true}, {"*", "", true}, {"A*", "A", true}, {"A*", "BA", false}, {"*_KEY", "AWS_KEY", true},
		{"*_KEY", "AWS_KEY2", false}, {"a*b*c", "abc", true}, {"a*b*c", "axbyc", true}, {"a*b*c", "acb", false},
		{"A*A", "A", false}, {"AWS_*", "aws_x", false}, {"X", "X", true}, {"X", "XX", false},
	} {
		if got := globMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}
