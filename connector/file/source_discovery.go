package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/state"
)

// This file finds a subtask's files: which files the glob matches, which of
// them are the subtask's, and what became of each file it reads (grown,
// renamed, replaced, truncated, gone).

// match is a file the glob matched at one look.
type match struct {
	path string
	size int64
	key  fileKey
}

// look is one evaluation of the glob: the regular files it matches that are
// not hidden, in path order, indexed by path, by key and by inode number.
type look struct {
	files  []*match
	byPath map[string]*match
	byKey  map[fileKey][]*match
	byIno  map[uint64][]*match
}

// look evaluates the glob and stats every match.
func (r *reader[T]) look() (*look, error) {
	paths, err := filepath.Glob(r.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("file source: glob %s: %w", r.cfg.Path, err)
	}
	l := &look{byPath: map[string]*match{}, byKey: map[fileKey][]*match{}, byIno: map[uint64][]*match{}}
	for _, p := range paths {
		if r.hidden(p) {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // gone again, or a directory
		}
		m := &match{path: p, size: fi.Size(), key: keyOf(fi)}
		l.files = append(l.files, m)
		l.byPath[p] = m
		if m.key.ok {
			l.byKey[m.key] = append(l.byKey[m.key], m)
			l.byIno[m.key.ino] = append(l.byIno[m.key.ino], m)
		}
	}
	return l, nil
}

// remember keeps which file each matched path held at look l, for isNew at
// the next look.
func (r *reader[T]) remember(l *look) {
	r.seen = make(map[uint64]string, len(l.files))
	for _, m := range l.files {
		if m.key.ok {
			r.seen[m.key.ino] = m.path
		}
	}
}

// owns reports whether path is this subtask's by the hash of the path (the
// assignment of version 1 positions, and where there are no inode numbers).
func (r *reader[T]) owns(path string) bool {
	return r.kgs.Contains(state.KeyGroupFor(state.HashKey(path), r.maxP))
}

// ownsFile reports whether the file at path with key k is this subtask's:
// its key group, as keyed state would place its inode number as a key, is
// in the subtask's range. The inode number, unlike the path, survives a
// rename, so a rotated file stays with the subtask that read it; it is
// hashed without the device number, which a remount may change.
func (r *reader[T]) ownsFile(path string, k fileKey) bool {
	if r.byPath || !k.ok {
		return r.owns(path)
	}
	return r.kgs.Contains(state.KeyGroupFor(state.HashKey(k.ino), r.maxP))
}

// ownsEntry reports whether a restored file position is this subtask's.
func (r *reader[T]) ownsEntry(fp filePosition) bool {
	if fp.ID == nil {
		return r.owns(fp.Path)
	}
	return r.ownsFile(fp.Path, fp.ID.key())
}

// hidden reports whether a component of path that a wildcard of the
// pattern matched begins with '.' or '_'.
func (r *reader[T]) hidden(path string) bool {
	parts := strings.Split(filepath.ToSlash(path), "/")
	if len(parts) != len(r.patternParts) {
		return false
	}
	for i, p := range r.patternParts {
		if strings.ContainsAny(p, `*?[\`) && (strings.HasPrefix(parts[i], ".") || strings.HasPrefix(parts[i], "_")) {
			return true
		}
	}
	return false
}

// knownKey is the key of r.known for a file at path with key k: its inode
// where there is one, else its path.
func knownKey(path string, k fileKey) string {
	if k.ok {
		return fmt.Sprintf("i%d:%d", k.dev, k.ino)
	}
	return "p" + path
}

// knownKey is s's key in r.known.
func (s *split) knownKey() string {
	if s.hasID {
		return knownKey(s.path, s.id.key())
	}
	return knownKey(s.path, fileKey{})
}

// add makes s one of the subtask's splits.
func (r *reader[T]) add(s *split, now time.Time) {
	s.idx = r.wm.AddSplit(now.UnixNano())
	if s.timed {
		r.wm.Observe(s.idx, s.maxTime)
	}
	if s.done {
		r.wm.Finish(s.idx)
	}
	s.pending = !s.done
	r.splits = append(r.splits, s)
	r.known[s.knownKey()] = s
}

// compact removes dropped splits and indexes the others again (their keys
// may have changed: a device number after a restore, a new identity after a
// reread).
func (r *reader[T]) compact() {
	r.splits = slices.DeleteFunc(r.splits, func(s *split) bool { return s.dropped })
	clear(r.known)
	for _, s := range r.splits {
		if !s.retiring {
			r.known[s.knownKey()] = s
		}
	}
}

// drop ends s: its file is gone (or replaced) after it was read to its end.
func (r *reader[T]) drop(s *split) {
	r.wm.Finish(s.idx)
	s.release()
	s.dropped = true
}

// discover adds the files of l that are this subtask's and not yet known,
// with their identities. With stop_at latest their ends are their sizes now.
// Two names of one file (hard links) are one split.
func (r *reader[T]) discover(l *look, now time.Time) error {
	for _, m := range l.files {
		if r.known[knownKey(m.path, m.key)] != nil || !r.ownsFile(m.path, m.key) {
			continue
		}
		s, err := r.newSplit(m.path, m.key)
		if err != nil {
			return err
		}
		if s != nil {
			r.add(s, now)
		}
	}
	return nil
}

// newSplit returns a split reading the file at path from its start, with
// the identity of the file there now; nil when it is gone again or no longer
// the file with key k that the look found.
func (r *reader[T]) newSplit(path string, k fileKey) (*split, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("file source: opening %s: %w", path, err)
	}
	defer f.Close()
	id, err := takeID(f)
	if err != nil {
		return nil, err
	}
	if id.key() != k {
		return nil, nil // replaced since the look: the next look finds it
	}
	s := &split{path: path, end: -1, id: id, hasID: true}
	if r.stopAtLatest() {
		s.end = id.Size
	}
	return s, nil
}

// poll (following only) places every split and discovers new files.
func (r *reader[T]) poll(now time.Time) error {
	l, err := r.look()
	if err != nil {
		return err
	}
	if err := r.placeAll(l, false); err != nil {
		return err
	}
	for _, s := range r.splits {
		if !s.pending && !s.done && !s.retiring && !s.dropped {
			r.wm.CaughtUp(s.idx, r.lookAt) // not grown: nothing to read
		}
	}
	if err := r.discover(l, now); err != nil {
		return err
	}
	r.remember(l)
	return nil
}

// placeAll places every split in l (see place).
func (r *reader[T]) placeAll(l *look, restoring bool) error {
	for _, s := range slices.Clone(r.splits) {
		if err := r.place(s, l, restoring); err != nil {
			return err
		}
	}
	r.compact()
	return nil
}

// relocate places s after an open found its path gone or naming another
// file.
func (r *reader[T]) relocate(s *split) error {
	s.release()
	l, err := r.look()
	if err != nil {
		return err
	}
	if err := r.place(s, l, false); err != nil {
		return err
	}
	r.compact()
	r.remember(l)
	return nil
}

// place finds s's file in l by its key and acts on what became of it:
//   - under its path and grown: s is pending;
//   - under another path (renamed to a name the glob matches): s follows it
//     there, from its offset, as the same watermark split;
//   - truncated or rewritten in place: see rewritten;
//   - not in l: see lost.
//
// A file found under another path, or after a restore (restoring: device
// numbers may differ, and the identity must hold for the files now), is
// confirmed by its content first: an inode number is reused once its file
// is deleted. So is an open file, which is read on through the open file.
func (r *reader[T]) place(s *split, l *look, restoring bool) error {
	if s.done || s.retiring || s.dropped {
		return nil
	}
	if !s.hasID {
		return r.placeByPath(s, l, restoring)
	}
	k := s.id.key()
	if !k.ok {
		return r.placeByPath(s, l, restoring)
	}
	cands := l.byKey[k]
	if restoring {
		cands = l.byIno[k.ino]
	}
	var at *match
	for _, m := range cands {
		if m.path == s.path {
			at = m
		}
	}
	if at == nil && len(cands) > 0 {
		at = cands[0]
	}
	switch {
	case at == nil:
		return r.lost(s, l)
	case s.f != nil:
		// Read on through the open file, unless it was truncated or
		// rewritten in place meanwhile.
		if err := r.renamed(s, at.path); err != nil {
			return err
		}
		id, changed, err := s.id.confirm(s.f, s.readOff())
		if err != nil {
			return err
		}
		if changed != "" {
			return r.rewritten(s, changed)
		}
		s.id = id
		return nil
	case at.path == s.path && !restoring:
		if at.size < max(s.readOff(), s.id.Size) {
			return r.rewritten(s, fmt.Sprintf("it is %d bytes, shorter than the %d bytes it had when read before", at.size, max(s.readOff(), s.id.Size)))
		}
		s.grown(at.size)
		return nil
	}
	f, err := os.Open(at.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r.lost(s, l)
	}
	if err != nil {
		return fmt.Errorf("file source: opening %s: %w", at.path, err)
	}
	id, changed, err := s.id.confirm(f, s.readOff())
	_ = f.Close()
	switch {
	case err != nil:
		return err
	case changed != "" && at.path == s.path:
		return r.rewritten(s, changed)
	case changed != "":
		// Another file with the inode number of s's file, which is gone.
		return r.lost(s, l)
	}
	if err := r.renamed(s, at.path); err != nil {
		return err
	}
	s.id = id
	s.grown(id.Size)
	return nil
}

// renamed moves s to path, where its file is now. Files assigned by path
// (a job restored from a version 1 position) cannot follow a rename to a
// path another subtask owns: it would read the file again from its start.
func (r *reader[T]) renamed(s *split, path string) error {
	if path == s.path {
		return nil
	}
	if r.byPath && !r.owns(path) {
		return fmt.Errorf("file source: %s was renamed to %s, which another subtask reads: this job, restored from a checkpoint of an earlier version, assigns files to subtasks by path, so that subtask would read it again from its start. "+
			"Restore the job at parallelism 1 (a rescale keeps its progress), where every file is one subtask's, to follow rotations", s.path, path)
	}
	r.log.Info("file source: file renamed; reading on under its new name", "path", s.path, "new_path", path, "offset", s.off)
	s.path = path
	return nil
}

// placeByPath places a split known by its path only: one restored from a
// version 1 position (the file now under its path is taken as the one read
// up to its offset, and its identity recorded), or on a platform without
// inode numbers.
func (r *reader[T]) placeByPath(s *split, l *look, restoring bool) error {
	m := l.byPath[s.path]
	switch {
	case m == nil:
		return r.lost(s, l)
	case s.f != nil:
		return nil
	case m.size < s.readOff():
		return r.rewritten(s, fmt.Sprintf("it is %d bytes, shorter than the %d bytes already read", m.size, s.readOff()))
	case !s.hasID:
		id, err := idOfPath(s.path)
		if err != nil {
			return err
		}
		s.id, s.hasID = id, true
		if restoring {
			r.log.Info("file source: the restored position, from an earlier version, has no identity for this file: taking the file under its path as the one read up to the offset, and recording its identity from now on", "path", s.path, "offset", s.off, "identity", id.String())
		}
	}
	s.grown(m.size)
	return nil
}

// grown notes that s's file is size bytes long now.
func (s *split) grown(size int64) {
	if size > s.readOff() {
		s.pending, s.atEnd = true, false
	}
}

// isNew reports whether m, found under the path of a split whose file is
// gone, is a file new to the glob: not one of this subtask's files, and not
// matched under another path at the previous look (a file of another
// subtask renamed there, as rotation with numbered names does). After a
// restore the previous look is the one the position was taken after (its
// Seen); a file that came since is taken as new.
func (r *reader[T]) isNew(m *match) bool {
	if r.known[knownKey(m.path, m.key)] != nil {
		return false
	}
	if p, ok := r.seen[m.key.ino]; ok && p != m.path {
		return false
	}
	return true
}

// lost acts on a split whose file is not among the glob's matches: deleted,
// renamed to a name the glob does not match, or replaced by another file.
//
// A file new to the glob under the split's path means the path was
// replaced: on_replace fail stops the source naming it; reread drops the
// split and reads the new file from its start. Otherwise (or with reread)
// nothing written to the old file is lost if it is open (it is read to its
// end through the open file, then dropped) or was read to its end at the
// last look (it is dropped); else the bytes after its offset cannot be read
// any more, an error.
func (r *reader[T]) lost(s *split, l *look) error {
	occ := l.byPath[s.path]
	replaced := occ != nil && r.isNew(occ)
	if replaced && r.cfg.OnReplace == ReplaceFail {
		return fmt.Errorf("file source: %s was replaced: the file read up to byte %d (%s) is no longer under that path, another file (%s) is; "+
			"files must only be appended to, or rotated by renaming them to a name the glob matches. "+
			"Set on_replace: reread to read a file that replaces another from its start (a rotation to a name the glob does not match needs it)",
			s.path, s.off, s.id, fileID{Ino: occ.key.ino, Size: occ.size})
	}
	what := "deleted or renamed to a name the glob does not match"
	if replaced {
		what = "replaced by another file"
	}
	switch {
	case s.f != nil:
		r.log.Info("file source: file "+what+"; reading it to its end through the open file", "path", s.path, "offset", s.off)
		s.retiring = true
	case s.done || (s.atEnd && s.end < 0):
		level := "file source: file " + what + " after it was read to its end when last seen; forgetting it"
		if replaced {
			r.log.Warn(level+"; reading the new file from its start (on_replace: reread)", "path", s.path, "offset", s.off, "old", s.id.String(), "new", fileID{Ino: occ.key.ino, Size: occ.size}.String())
		} else {
			r.log.Info(level, "path", s.path, "offset", s.off)
		}
		r.drop(s)
	default:
		return fmt.Errorf("file source: %s was %s before it was read to its end (read up to byte %d of it): the rest of it cannot be read any more; a file must stay until it is read to its end", s.path, what, s.off)
	}
	if replaced && r.stopAtLatest() {
		// The file list is fixed: the replacement takes the old file's
		// place, read to its size now.
		n, err := r.newSplit(occ.path, occ.key)
		if err != nil {
			return err
		}
		if n != nil {
			r.add(n, r.clock())
		}
	}
	return nil
}

// rewritten acts on a split whose file, still under its key, got shorter
// than what was read or whose first bytes changed (why says which):
// on_replace fail stops the source naming the file; reread reads it again
// from its start, as a new watermark split.
func (r *reader[T]) rewritten(s *split, why string) error {
	if r.cfg.OnReplace == ReplaceFail {
		return fmt.Errorf("file source: %s was truncated or rewritten in place: %s (read up to byte %d); files must only be appended to. "+
			"Set on_replace: reread to read such a file again from its start", s.path, why, s.readOff())
	}
	r.log.Warn("file source: file truncated or rewritten in place; reading it again from its start (on_replace: reread)", "path", s.path, "reason", why, "offset", s.off)
	s.release()
	id, err := idOfPath(s.path)
	if err != nil {
		return err
	}
	r.wm.Finish(s.idx)
	*s = split{path: s.path, idx: r.wm.AddSplit(r.clock().UnixNano()), end: -1, id: id, hasID: true, pending: true}
	if r.stopAtLatest() {
		s.end = id.Size
	}
	return nil
}
