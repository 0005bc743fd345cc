package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each engine is named from the sign it leaves, in a root and an
// environment of the test's own; with none, every engine's words.
func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		env   map[string]string
		want  Engine
	}{
		{"nothing", nil, nil, Unknown},
		{"podman", []string{"run/.containerenv"}, nil, Podman},
		{"docker", []string{".dockerenv"}, nil, Docker},
		{"kubernetes", nil, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, Kubernetes},
		// A pod's container may also carry the file of the engine beneath.
		{"kubernetes over docker", []string{".dockerenv"}, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, Kubernetes},
		{"podman's file wins over docker's", []string{"run/.containerenv", ".dockerenv"}, nil, Podman},
		{"an empty variable is no sign", nil, map[string]string{"KUBERNETES_SERVICE_HOST": ""}, Unknown},
		{"a file elsewhere is no sign", []string{"containerenv", "run/dockerenv"}, nil, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tc.files {
				path := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(name string) string { return tc.env[name] }
			if got := Detect(root, getenv); got != tc.want {
				t.Errorf("Detect = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		e        Engine
		want     []string
		not      []string
		allWords bool
	}{
		{Podman, []string{"podman run --security-opt unmask=ALL", "podman run --cap-add SYS_ADMIN"}, []string{"docker", "Kubernetes", "systempaths"}, false},
		{Docker, []string{"docker run --security-opt systempaths=unconfined", "docker run --cap-add SYS_ADMIN"}, []string{"podman", "Kubernetes"}, false},
		{Kubernetes, []string{"procMount: Unmasked", "capabilities.add: [SYS_ADMIN]"}, []string{"docker", "podman"}, false},
		{Unknown, []string{"systempaths=unconfined", "unmask=ALL", "procMount: Unmasked", "docker run --cap-add SYS_ADMIN", "podman run --cap-add SYS_ADMIN", "capabilities.add: [SYS_ADMIN]"}, nil, true},
	} {
		got := tc.e.Unmask() + " | " + tc.e.CapAdd("SYS_ADMIN") + " | " + tc.e.SeccompUnconfined() + " | " + tc.e.User() + " | " + tc.e.Ulimit("nofile")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: lacks %q: %q", tc.e, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%q: has %q: %q", tc.e, n, got)
			}
		}
		if tc.e.Known() == tc.allWords {
			t.Errorf("%q: Known() = %v", tc.e, tc.e.Known())
		}
	}
}
