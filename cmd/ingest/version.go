package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// This file is `ingest version` and `ingest --version`: what the binary was
// built from, as the Go toolchain stamped it (runtime/debug.ReadBuildInfo).

// versionText renders the build information bi: the module version, the
// VCS commit with its time and whether the tree had uncommitted changes,
// and the Go version and platform. ok is ReadBuildInfo's: false for a
// binary without build information.
//
//	ingest v1.2.0
//	commit 3c78aae0f1d2… 2026-12-01T10:00:00Z (uncommitted changes)
//	go1.26.10 linux/amd64
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "ingest: no build information (built without module support)\n"
	}
	version := bi.Main.Version
	switch version {
	case "", "(devel)":
		// go build in a checkout: the version is the commit below.
		version = "(devel)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ingest %s\n", version)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "commit %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(" (uncommitted changes)")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("commit unknown (built outside a git checkout, or with -buildvcs=false)\n")
	}
	platform := settings["GOOS"] + "/" + settings["GOARCH"]
	if platform == "/" {
		platform = ""
	}
	fmt.Fprintln(&b, strings.TrimSpace(bi.GoVersion+" "+platform))
	return b.String()
}

// buildVersion is versionText of this binary.
func buildVersion() string { return versionText(debug.ReadBuildInfo()) }

// versionCmd prints buildVersion.
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, VCS commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), buildVersion())
			return err
		},
	}
}
