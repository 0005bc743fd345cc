package sandbox

import (
	"errors"
	"testing"
)

// root.readonly is --read-only, and the only root corral honours is "/".
func TestConfigRoot(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"root": {"path": "/", "readonly": true}}`:  true,
		`{"root": {"path": "//", "readonly": true}}`: true,
		`{"root": {"path": "/", "readonly": false}}`: false,
		`{"root": {"path": "/"}}`:                    false,
		`{"root": null}`:                             false,
	} {
		c, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		var o Options
		c.Apply(&o)
		if c.ReadOnly != want || o.Privileges.Landlock.ReadOnly != want {
			t.Errorf("%s: read-only %v, applied %v; want %v", doc, c.ReadOnly, o.Privileges.Landlock.ReadOnly, want)
		}
	}
	for doc, path := range map[string]string{
		`{"root": {"path": "rootfs", "readonly": true}}`: "root.path",
		`{"root": {"path": "/srv/rootfs"}}`:              "root.path",
		`{"root": {"readonly": true}}`:                   "root.path",
		`{"root": {"path": "/", "readonly": "yes"}}`:     "root.readonly",
	} {
		_, err := ParseConfig([]byte(doc))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != path {
			t.Errorf("%s: error %v, want one naming %s", doc, err, path)
		}
	}
}
