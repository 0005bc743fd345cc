package test

// deploy/ (issue 11), in the style of the Python supervisor's first test
// (test_manifest_installs_supervisor_as_pid_one_boundary): the Deployment
// runs corral as the container's entrypoint in front of the runner after
// "--", corral's grace fits in the pod's, the kustomization lists the
// manifest, and the Dockerfile installs the corral the manifest starts.
// The YAML is parsed with a real parser. No image is built here (no
// container engine on these machines): the Dockerfile is checked for what
// makes it correct by construction, and the binary it would build is the
// one TestMain builds the same way.

import (
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func deployFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// deployment is the part of an apps/v1 Deployment the test reads.
type deployment struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds *int             `yaml:"terminationGracePeriodSeconds"`
				ShareProcessNamespace         *bool            `yaml:"shareProcessNamespace"`
				SecurityContext               securityContext  `yaml:"securityContext"`
				Containers                    []containerSpec  `yaml:"containers"`
				Volumes                       []map[string]any `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type securityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
		Add  []string `yaml:"add"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type containerSpec struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// dockerfileStage is one FROM ... of a Dockerfile, with its instructions.
type dockerfileStage struct {
	from, name string
	lines      []string // instructions, continuation lines joined
}

func parseDockerfile(t *testing.T, text string) []dockerfileStage {
	t.Helper()
	var stages []dockerfileStage
	var logical []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		logical = append(logical, cur+trimmed)
		cur = ""
	}
	for _, l := range logical {
		word, rest, _ := strings.Cut(l, " ")
		if strings.EqualFold(word, "FROM") {
			f := strings.Fields(rest)
			s := dockerfileStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, l)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("deploy/Dockerfile: want a multi-stage build, found %d stages", len(stages))
	}
	return stages
}

// instruction returns the arguments of the last instruction named word.
func (s dockerfileStage) instruction(word string) (string, bool) {
	for i := len(s.lines) - 1; i >= 0; i-- {
		w, rest, _ := strings.Cut(s.lines[i], " ")
		if strings.EqualFold(w, word) {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

func TestManifestInstallsCorralAsPIDOneBoundary(t *testing.T) {
	t.Parallel()
	var d deployment
	if err := yaml.Unmarshal(deployFile(t, "deployment.yaml"), &d); err != nil {
		t.Fatalf("deploy/deployment.yaml: %v", err)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Fatalf("deploy/deployment.yaml is %s %s, want an apps/v1 Deployment", d.APIVersion, d.Kind)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container (corral in front of the runner), got %d", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The Dockerfile's final stage installs corral and makes it the
	// entrypoint, exec form, ending in "--".
	stages := parseDockerfile(t, string(deployFile(t, "Dockerfile")))
	build, final := stages[0], stages[len(stages)-1]
	run, _ := build.instruction("RUN")
	if !strings.Contains(run, "CGO_ENABLED=0") || !strings.Contains(run, "go build") || !strings.Contains(run, "./cmd/corral") {
		t.Errorf("the build stage does not build ./cmd/corral static (CGO_ENABLED=0): RUN %s", run)
	}
	copyLine, ok := final.instruction("COPY")
	if !ok || !strings.HasPrefix(copyLine, "--from="+build.name+" ") {
		t.Fatalf("the final stage does not copy corral from the build stage %q: COPY %s", build.name, copyLine)
	}
	copied := strings.Fields(copyLine)
	installed := copied[len(copied)-1]
	entry, ok := final.instruction("ENTRYPOINT")
	if !ok {
		t.Fatal("deploy/Dockerfile has no ENTRYPOINT")
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(entry), &entrypoint); err != nil {
		t.Fatalf("ENTRYPOINT is not the exec form (a JSON list), so a shell would be PID 1: %s", entry)
	}
	if len(entrypoint) < 2 || entrypoint[0] != installed || entrypoint[len(entrypoint)-1] != "--" {
		t.Errorf("ENTRYPOINT %q: want the installed corral %s first and \"--\" last", entrypoint, installed)
	}
	// The Go the build stage uses is the one go.mod asks for.
	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod); m == nil || !strings.HasPrefix(build.from, "golang:"+string(m[1])) {
		t.Errorf("build stage FROM %s does not match go.mod's go %s", build.from, m[1])
	}

	// The container runs that corral as its entrypoint, in front of the
	// runner after "--".
	if len(c.Command) < 2 || c.Command[0] != installed {
		t.Fatalf("container command %q does not start with the installed corral %s", c.Command, installed)
	}
	dash := slices.Index(c.Command, "--")
	if dash != len(c.Command)-1 {
		t.Fatalf("container command %q: want corral's options, then \"--\" last, with the runner in args", c.Command)
	}
	if len(c.Args) == 0 || !filepath.IsAbs(c.Args[0]) {
		t.Errorf("the runner after \"--\" (args) must be an absolute path: %q", c.Args)
	}

	// corral's grace is comfortably below the pod's: the kubelet SIGKILLs
	// the container at terminationGracePeriodSeconds, and corral needs the
	// time to SIGKILL what is left and write its final state.
	grace := 10.0 // corral's default
	for _, e := range c.Env {
		if e.Name == "CORRAL_GRACE_SECONDS" || e.Name == "HERMES_CLI_PROCESS_GRACE_SECONDS" {
			t.Errorf("set the grace with --grace in command, where this test reads it: env %s", e.Name)
		}
	}
	if i := slices.Index(c.Command, "--grace"); i >= 0 && i+1 < dash {
		if grace, err = strconv.ParseFloat(c.Command[i+1], 64); err != nil || grace > 30 {
			t.Fatalf("--grace %q: want seconds within corral's bounds [0, 30]", c.Command[i+1])
		}
	}
	if pod.TerminationGracePeriodSeconds == nil {
		t.Fatal("terminationGracePeriodSeconds is not set (the default 30 s leaves corral little time)")
	}
	if tg := float64(*pod.TerminationGracePeriodSeconds); tg < grace+10 {
		t.Errorf("terminationGracePeriodSeconds %v is not comfortably above corral's --grace %v (want at least 10 s more)", tg, grace)
	}
	if pod.ShareProcessNamespace != nil && *pod.ShareProcessNamespace {
		t.Error("shareProcessNamespace makes the pause container PID 1, not corral")
	}

	// A realistic, hardened securityContext.
	if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if sc := c.SecurityContext; sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container securityContext.allowPrivilegeEscalation is not false")
	}
	if !slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) || len(c.SecurityContext.Capabilities.Add) > 0 {
		t.Errorf("capabilities: want drop [ALL] and nothing added, got %+v", c.SecurityContext.Capabilities)
	}
	if pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" && c.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Error("seccompProfile is not RuntimeDefault")
	}

	// The state file is on an emptyDir, where a probe can read it.
	i := slices.Index(c.Command, "--state")
	if i < 0 || i+1 >= dash {
		t.Fatalf("command %q sets no --state", c.Command)
	}
	state := c.Command[i+1]
	mounted := false
	for _, m := range c.VolumeMounts {
		if filepath.Dir(state) == filepath.Clean(m.MountPath) {
			for _, v := range pod.Volumes {
				if v["name"] == m.Name {
					_, mounted = v["emptyDir"]
				}
			}
		}
	}
	if !mounted {
		t.Errorf("the state file %s is not on an emptyDir volume", state)
	}

	// The kustomization lists the manifest.
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(deployFile(t, "kustomization.yaml"), &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	if !slices.Contains(k.Resources, "deployment.yaml") {
		t.Errorf("the kustomization's resources %q do not list deployment.yaml", k.Resources)
	}
}

// The binary deploy/Dockerfile builds (CGO_ENABLED=0, as TestMain builds
// it) has no dynamic loader: it runs in a distroless or scratch image.
func TestCorralBinaryIsStatic(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(corralBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("corral is dynamically linked (%v): it would not run in a minimal image", p.Type)
		}
	}
}
