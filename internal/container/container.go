// Package container names the container engine corral runs under, so that
// a hint gives the fix in that engine's words: podman's option to unmask
// /proc is not Docker's, and Kubernetes has no command line at all. Where
// no engine can be named, a hint gives every engine's words.
package container

import (
	"os"
	"path/filepath"
)

// Engine is a container engine, as seen from inside its container.
type Engine int

const (
	// Unknown: no engine left a sign (a bare host, or an engine that
	// leaves none); hints give every engine's words.
	Unknown Engine = iota
	Podman
	Docker
	Kubernetes
)

// Detect names the engine from what each one leaves in its containers:
// Kubernetes sets KUBERNETES_SERVICE_HOST in every container's
// environment, podman writes /run/.containerenv, Docker /.dockerenv.
// Kubernetes comes first: a pod's container may also carry the file of
// the engine beneath the kubelet. root is where / is (tests pass a
// directory of their own) and getenv reads the environment.
func Detect(root string, getenv func(string) string) Engine {
	switch {
	case getenv("KUBERNETES_SERVICE_HOST") != "":
		return Kubernetes
	case exists(filepath.Join(root, "run/.containerenv")):
		return Podman
	case exists(filepath.Join(root, ".dockerenv")):
		return Docker
	}
	return Unknown
}

// Here is Detect for this process: its own / and environment.
func Here() Engine { return Detect("/", os.Getenv) }

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// String is the engine's name, "" for Unknown.
func (e Engine) String() string {
	switch e {
	case Podman:
		return "podman"
	case Docker:
		return "Docker"
	case Kubernetes:
		return "Kubernetes"
	}
	return ""
}

// Known says whether an engine was named: corral then runs in one of its
// containers, where what only the host can change (a mount of cgroup2, a
// sysctl) is the engine's to give.
func (e Engine) Known() bool { return e != Unknown }

// words is how each engine asks for one thing, in the order an unknown
// engine lists them.
type words struct{ docker, podman, kubernetes string }

func (e Engine) say(w words) string {
	switch e {
	case Podman:
		return w.podman
	case Docker:
		return w.docker
	case Kubernetes:
		return w.kubernetes
	}
	return w.docker + "; " + w.podman + "; " + w.kubernetes
}

// Unmask is how to give the container a /proc without masked paths.
func (e Engine) Unmask() string {
	return e.say(words{
		"docker run --security-opt systempaths=unconfined",
		"podman run --security-opt unmask=ALL",
		"Kubernetes securityContext.procMount: Unmasked (with hostUsers: false)",
	})
}

// CapAdd is how to give the container capability name ("SYS_ADMIN").
func (e Engine) CapAdd(name string) string {
	return e.say(words{
		"docker run --cap-add " + name,
		"podman run --cap-add " + name,
		"Kubernetes securityContext.capabilities.add: [" + name + "]",
	})
}

// SeccompUnconfined is how to run the container without the engine's
// default seccomp profile.
func (e Engine) SeccompUnconfined() string {
	return e.say(words{
		"docker run --security-opt seccomp=unconfined",
		"podman run --security-opt seccomp=unconfined",
		"Kubernetes seccompProfile: Unconfined or a Localhost profile",
	})
}

// User is how to run the container's process as a non-zero uid.
func (e Engine) User() string {
	return e.say(words{"docker run --user UID", "podman run --user UID", "Kubernetes runAsUser"})
}

// Ulimit is how to raise the container's limit of resource name
// ("nofile").
func (e Engine) Ulimit(name string) string {
	return e.say(words{
		"docker run --ulimit " + name + "=N:N",
		"podman run --ulimit " + name + "=N:N",
		"Kubernetes: the node's container runtime sets it",
	})
}
