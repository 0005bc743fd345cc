package ociconfig

import (
	"errors"
	"testing"

	"github.com/corral-sh/corral/sandbox"
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
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		var o sandbox.Options
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
		_, err := Parse([]byte(doc))
		var ce *Error
		if !errors.As(err, &ce) || ce.Path != path {
			t.Errorf("%s: error %v, want one naming %s", doc, err, path)
		}
	}
}
