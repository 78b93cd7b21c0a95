package main

import (
	"bytes"
	"errors"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The version names the module version, the commit with its time and
// whether the tree was modified, and the Go version and platform, as the
// toolchain stamped them.
func TestVersionText(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "GOARCH", Value: "arm64"}, {Key: "GOOS", Value: "darwin"},
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.10", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs}, true,
			"ingest v1.2.0\ncommit 0123456789abcdef0123456789abcdef01234567 2026-12-01T10:00:00Z\ngo1.26.10 darwin/arm64\n"},
		{"a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.10", Main: debug.Module{Version: "(devel)"},
			Settings: append(vcs[:len(vcs)-1:len(vcs)-1], debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, true,
			"ingest (devel)\ncommit 0123456789abcdef0123456789abcdef01234567 2026-12-01T10:00:00Z (uncommitted changes)\ngo1.26.10 darwin/arm64\n"},
		{"no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs[:2]}, true,
			"ingest (devel)\ncommit unknown (built outside a git checkout, or with -buildvcs=false)\ngo1.26.8 darwin/arm64\n"},
		{"no build info", nil, false, "ingest: no build information (built without module support)\n"},
	} {
		if got := versionText(c.bi, c.ok); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// `ingest version` and `ingest --version` print this binary's version.
func TestVersionCommands(t *testing.T) {
	want := versionText(debug.ReadBuildInfo())
	if !strings.HasPrefix(want, "ingest ") || !strings.Contains(want, "\n"+goruntime.Version()+" "+goruntime.GOOS+"/"+goruntime.GOARCH+"\n") {
		t.Fatalf("this binary's version %q does not name its Go version", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := rootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}
}

// A command run without its arguments says which are missing and prints
// its usage line.
func TestMissingArgumentPrintsUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "missing arguments: ingest run takes 1, got 0\nusage: ingest run FILE [flags]"},
		{[]string{"validate"}, "missing arguments: ingest validate takes 1, got 0\nusage: ingest validate FILE [flags]"},
		{[]string{"validate", "a.yaml", "b.yaml"}, "too many arguments: ingest validate takes 1, got 2\nusage: ingest validate FILE [flags]"},
		{[]string{"checkpoints", "list"}, "usage: ingest checkpoints list FILE [flags]"},
		{[]string{"checkpoints", "inspect", "p.yaml"}, "missing arguments: ingest checkpoints inspect takes 2, got 1\nusage: ingest checkpoints inspect FILE ID [flags]"},
		{[]string{"checkpoints", "delete", "p.yaml"}, "usage: ingest checkpoints delete FILE ID [flags]"},
	} {
		root := rootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(c.args)
		err := root.Execute()
		var ee *exitError
		if err == nil || !strings.HasSuffix(err.Error(), c.want) || errors.As(err, &ee) {
			t.Errorf("%v: %v, want a usage error ending %q", c.args, err, c.want)
		}
	}
}
