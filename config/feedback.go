package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file refuses a pipeline whose file sink writes where one of its file
// sources reads: the sink's committed output would come back as input, and
// again after every checkpoint.

// fileGlob is a file source's path glob, absolute.
type fileGlob struct {
	source, glob string
}

// fileSinkDir is a file sink's directory, absolute, and where it is set.
type fileSinkDir struct {
	sink, dir string
	at        *yaml.Node
	field     string
}

// checkFeedback reports every file sink whose directory a file source's
// glob reaches, at the sink's path, naming both.
func (b *builder) checkFeedback() {
	for _, k := range b.fileSinks {
		for _, g := range b.fileGlobs {
			if globReaches(g.glob, k.dir) {
				b.e.add(k.at, k.field, "file source %q reads %s, which matches files under this sink's directory %s: the pipeline would read its own output as input; give the sink a directory the source's path does not reach",
					g.source, b.relPath(g.glob), b.relPath(k.dir))
			}
		}
	}
}

// globReaches reports whether the file glob (absolute) can match a path
// inside dir (absolute), the directory a file sink owns: every file under it
// is the sink's output or staging, whatever the sink calls them. The paths
// are compared as written and with their symbolic links resolved as far as
// they exist now: the glob's literal prefix, the directories its wildcards
// match that are links, and dir itself (which may not exist yet).
func globReaches(glob, dir string) bool {
	comps := pathComponents(glob)
	globs := [][]string{comps}
	lit := 0
	for lit < len(comps) && !hasMeta(comps[lit]) {
		lit++
	}
	if prefix := joinComponents(comps[:lit]); prefix != "" {
		globs = append(globs, append(pathComponents(resolve(prefix)), comps[lit:]...))
	}
	for i := max(lit, 1); i < len(comps)-1; i++ {
		matches, _ := filepath.Glob(joinComponents(comps[:i+1]))
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				if r, err := filepath.EvalSymlinks(m); err == nil {
					globs = append(globs, append(pathComponents(r), comps[i+1:]...))
				}
			}
		}
	}
	for _, d := range []string{dir, resolve(dir)} {
		under := pathComponents(d)
		for _, g := range globs {
			if reachesUnder(g, under) {
				return true
			}
		}
	}
	return false
}

// reachesUnder reports whether the glob of components g can match a path
// strictly below the directory of components dir: g is longer, and each of
// its components matches dir's, as the file source matches them (a wildcard
// does not match a hidden name, one beginning with '.' or '_').
func reachesUnder(g, dir []string) bool {
	if len(g) <= len(dir) {
		return false
	}
	for i, name := range dir {
		ok, err := filepath.Match(g[i], name)
		if err != nil || !ok || (hasMeta(g[i]) && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"))) {
			return false
		}
	}
	return true
}

// pathComponents splits an absolute, clean path into its components; the
// first is "" (the root) or a volume name.
func pathComponents(p string) []string {
	return strings.Split(filepath.Clean(p), string(filepath.Separator))
}

// joinComponents joins what pathComponents split ("" for none, the root
// for the root alone).
func joinComponents(c []string) string {
	switch p := strings.Join(c, string(filepath.Separator)); {
	case len(c) == 0:
		return ""
	case p == "":
		return string(filepath.Separator)
	default:
		return p
	}
}

// hasMeta reports whether a glob component holds a wildcard or an escape.
func hasMeta(c string) bool { return strings.ContainsAny(c, `*?[\`) }

// resolve returns p with the symbolic links of its longest existing prefix
// resolved, and the rest as it is.
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
