package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// This file is the file sink's committer: what a committable says about a
// staged file, how a commit verifies and publishes staged files, how it tells
// a checkpoint it already published from another one that happens to carry
// the same id, and how recovery abandons what no checkpoint will publish.

// ErrStagedOutputLost marks a commit whose staged file is gone: neither in
// staging nor already moved. It means output was deleted outside the
// protocol; the commit fails rather than publish a partial checkpoint.
var ErrStagedOutputLost = errors.New("staged output lost")

// ErrStagedOutputDamaged marks a commit whose staged file is not what was
// staged: its size or checksum differs from the committable's (truncated, or
// changed outside the protocol). The commit fails rather than publish it.
var ErrStagedOutputDamaged = errors.New("staged output damaged")

// ErrPublishedDiffers marks a commit of a checkpoint whose directory exists
// with other content: the same checkpoint id named other output. The engine
// never reuses an id (its checkpoint ledger remembers them); this happens when
// the ledger was deleted or replaced, and the commit fails rather than take
// the directory for its own.
var ErrPublishedDiffers = errors.New("published output differs")

// manifestName is the file in each committed directory that lists what its
// commit published. Its name starts with '_', so readers of the committed
// output skip it.
const manifestName = "_manifest.json"

// stagedFile is what one committable says: the file a sink subtask staged at
// a barrier, where, and what it holds.
type stagedFile struct {
	// Dir is the sink's directory (absolute) when the file was staged: a
	// commit looks for it there, whatever the sink's path is now.
	Dir string `json:"dir,omitempty"`
	// File is the staged file's name under <Dir>/_staging/pending, and its
	// name in the committed directory.
	File string `json:"file"`
	// Size and CRC are the file's length and CRC-32C as the subtask wrote it.
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
	// legacy: a committable of an older version, the bare file name, which
	// records neither directory nor checksum.
	legacy bool
}

func (f stagedFile) encode() []byte {
	b, _ := json.Marshal(f) // strings and integers always marshal
	return b
}

// decodeStaged reads a committable: JSON, or a bare file name (older
// versions).
func decodeStaged(data []byte) (stagedFile, error) {
	if len(data) == 0 || data[0] != '{' {
		name := string(data)
		if !plainName(name) {
			return stagedFile{}, fmt.Errorf("committable %q is not a staged file name", data)
		}
		return stagedFile{File: name, legacy: true}, nil
	}
	var f stagedFile
	if err := json.Unmarshal(data, &f); err != nil {
		return stagedFile{}, fmt.Errorf("committable %q: %w", data, err)
	}
	if !plainName(f.File) || strings.HasPrefix(f.File, "_") || f.Size < 0 {
		return stagedFile{}, fmt.Errorf("committable %q names no staged file", data)
	}
	return f, nil
}

// plainName reports whether name is a file name a sink subtask could have
// staged: one path element, not hidden, no separator or NUL, so that joined
// to the staging directory it names a file in it and nothing else.
func plainName(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00") && name == filepath.Base(name)
}

// manifest is the content of a committed directory's manifestName.
type manifest struct {
	Job        string `json:"job"`
	Checkpoint int64  `json:"checkpoint"`
	// Files are the published files, sorted by name.
	Files []manifestFile `json:"files"`
	// Lost are staged files the commit left out (--accept-lost-output),
	// sorted.
	Lost []string `json:"lost,omitempty"`
}

// manifestFile is one published file of a manifest.
type manifestFile struct {
	File string `json:"file"`
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
}

// committer publishes staged files; it is stateless, all it needs is in the
// commit and on disk.
type committer struct{ dir string }

// Commit publishes cm's files in one directory rename: each staged file is
// verified against its committable (size and CRC-32C), moved into a commit
// directory, a manifest is written beside them, and the directory is renamed
// to its CommittedDir. It recognises a checkpoint it already published by the
// manifest's content, never by the directory's name alone, and resumes a
// commit a crash interrupted. A staged file that is missing or damaged stops
// the commit with an error that names it and the ways on, unless ctx accepts
// lost output (runtime.WithLostOutputAccepted): the commit then publishes
// the rest and the manifest lists what it left out.
//
// After the sink's path changed, output staged before the change is
// recognised where it was published, or published where it now is when the
// directory was moved with its staging; otherwise the commit fails naming
// both paths (see stagedIn).
func (c committer) Commit(ctx context.Context, jobID string, cm checkpoint.Commit) error {
	if len(cm.Committables) == 0 {
		return nil
	}
	files := make([]stagedFile, len(cm.Committables))
	for i, data := range cm.Committables {
		f, err := decodeStaged(data)
		if err != nil {
			return fmt.Errorf("file sink %s: committing checkpoint %d: %w (%w)", c.dir, cm.Checkpoint, err, runtime.ErrIncompatible)
		}
		files[i] = f
	}
	dir, err := c.stagedIn(ctx, jobID, cm.Checkpoint, files)
	if err != nil {
		return err
	}
	final := CommittedDir(dir, jobID, cm.Checkpoint)
	if _, err := os.Stat(final); err == nil {
		return checkPublished(final, jobID, cm.Checkpoint, files)
	}
	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", jobID, cm.Checkpoint))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	m := manifest{Job: jobID, Checkpoint: cm.Checkpoint}
	for i, f := range files {
		if i > 0 {
			if err := failpoint.Inject("sink/file/mid-commit"); err != nil {
				return err
			}
		}
		src := filepath.Join(pendingDir(dir), f.File)
		dst := filepath.Join(tmp, f.File)
		// A file moved before a crash is in the commit directory already.
		at := dst
		if _, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
			at = src
		}
		if err := verifyStaged(at, f); err != nil {
			if !runtime.LostOutputAccepted(ctx) || !(errors.Is(err, ErrStagedOutputLost) || errors.Is(err, ErrStagedOutputDamaged)) {
				return stagedError(cm.Checkpoint, err)
			}
			runtime.LoggerFrom(ctx).Warn("publishing a checkpoint without a staged file that was lost or damaged (--accept-lost-output): its records are lost",
				"checkpoint", cm.Checkpoint, "file", at, "err", err)
			m.Lost = append(m.Lost, f.File)
			if at == dst {
				if err := os.Remove(dst); err != nil {
					return fmt.Errorf("file sink: removing damaged %s: %w", dst, err)
				}
			}
			continue
		}
		if at == src {
			if err := os.Rename(src, dst); err != nil {
				return fmt.Errorf("file sink: committing checkpoint %d: %w", cm.Checkpoint, err)
			}
		}
		m.Files = append(m.Files, manifestFile{File: f.File, Size: f.Size, CRC: f.CRC})
	}
	if err := writeManifest(tmp, m); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("file sink: publishing checkpoint %d: %w", cm.Checkpoint, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// stagedIn returns the directory to publish files in: the sink's, unless the
// committables record another one (the sink's path changed since they were
// staged). Then:
//   - the sink's directory is still right when it holds the checkpoint's
//     published directory or every staged file (the whole directory was
//     moved or copied, staging included);
//   - the recorded one when the checkpoint was published there: the commit
//     is already done, and done recognises it;
//   - anything else is an error naming both paths and the ways on, since
//     the staged output is under the old path and publishing it there would
//     be a surprise, and not publishing it would lose it.
//
// All files of a commit were staged in one directory.
func (c committer) stagedIn(ctx context.Context, jobID string, id int64, files []stagedFile) (string, error) {
	now := absDir(c.dir)
	was := ""
	for _, f := range files {
		d := f.Dir
		if d == "" {
			d = now // an older committable: staged where the sink writes
		}
		if was != "" && d != was {
			return "", fmt.Errorf("file sink: checkpoint %d's output was staged in two directories, %s and %s (%w)", id, was, d, runtime.ErrUnrecoverable)
		}
		was = d
	}
	if was == now {
		return now, nil
	}
	if exists(CommittedDir(now, jobID, id)) || allStaged(now, jobID, id, files) {
		return now, nil // moved or copied with its staging
	}
	if exists(CommittedDir(was, jobID, id)) {
		runtime.LoggerFrom(ctx).Info("the file sink's path changed: this checkpoint's output was published under the old path",
			"checkpoint", id, "old_path", was, "path", now)
		return was, nil
	}
	return "", fmt.Errorf("file sink: checkpoint %d's output was staged under %s, but the sink's path is now %s: nothing is lost, but it is still to be published. "+
		"Set the path back to %s for one run (the output is published there, and later checkpoints stage nothing there), "+
		"or move the files of %s into %s before running with the new path (%w)",
		id, was, now, was, pendingDir(was), pendingDir(now), runtime.ErrUnrecoverable)
}

// allStaged reports whether every file is staged under dir (pending, or
// moved into its commit directory by an interrupted commit).
func allStaged(dir, jobID string, id int64, files []stagedFile) bool {
	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", jobID, id))
	for _, f := range files {
		if !exists(filepath.Join(pendingDir(dir), f.File)) && !exists(filepath.Join(tmp, f.File)) {
			return false
		}
	}
	return true
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkPublished decides whether the existing committed directory final is
// this commit's: its manifest lists exactly files (with their sizes and
// checksums), or, written by an older version without a manifest, it holds
// every file. Anything else is ErrPublishedDiffers.
func checkPublished(final, jobID string, id int64, files []stagedFile) error {
	data, err := os.ReadFile(filepath.Join(final, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(final, f.File)); err != nil {
				return publishedDiffers(final, id, fmt.Sprintf("it has no %s", f.File))
			}
		}
		return nil // published by an older version
	}
	if err != nil {
		return fmt.Errorf("file sink: reading %s: %w", filepath.Join(final, manifestName), err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return publishedDiffers(final, id, fmt.Sprintf("its manifest does not decode: %v", err))
	}
	if m.Job != jobID || m.Checkpoint != id {
		return publishedDiffers(final, id, fmt.Sprintf("its manifest names job %s, checkpoint %d", m.Job, m.Checkpoint))
	}
	got := map[string]manifestFile{}
	for _, f := range m.Files {
		got[f.File] = f
	}
	for _, name := range m.Lost {
		got[name] = manifestFile{File: name, Size: -1}
	}
	if len(got) != len(files) {
		return publishedDiffers(final, id, fmt.Sprintf("it lists %d files, the commit %d", len(got), len(files)))
	}
	for _, f := range files {
		g, ok := got[f.File]
		switch {
		case !ok:
			return publishedDiffers(final, id, fmt.Sprintf("it has no %s", f.File))
		case g.Size >= 0 && !f.legacy && (g.Size != f.Size || g.CRC != f.CRC):
			return publishedDiffers(final, id, fmt.Sprintf("its %s has %d bytes, CRC-32C %08x; the commit's %d bytes, %08x", f.File, g.Size, g.CRC, f.Size, f.CRC))
		}
	}
	return nil // already committed
}

func publishedDiffers(final string, id int64, why string) error {
	return fmt.Errorf("file sink: checkpoint %d is published at %s with other content (%s): the same checkpoint id named other output, which happens when the checkpoint ledger (_ledger in the checkpoint storage) was deleted or replaced. "+
		"Nothing was published over it; move %s away to publish this checkpoint's output, or keep it and point the sink at a new path: %w (%w)",
		id, final, why, final, ErrPublishedDiffers, runtime.ErrUnrecoverable)
}

// verifyStaged checks that the file at path is f: present, f.Size bytes,
// CRC-32C f.CRC. A legacy committable records neither: the file need only
// exist.
func verifyStaged(path string, f stagedFile) error {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("staged file %s: %w", path, ErrStagedOutputLost)
	}
	if err != nil {
		return fmt.Errorf("staged file %s: %w", path, err)
	}
	defer fh.Close()
	if f.legacy {
		return nil
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, fh)
	if err != nil {
		return fmt.Errorf("staged file %s: %w", path, err)
	}
	if n != f.Size || h.Sum32() != f.CRC {
		return fmt.Errorf("staged file %s has %d bytes, CRC-32C %08x; it was staged with %d bytes, CRC-32C %08x: %w", path, n, h.Sum32(), f.Size, f.CRC, ErrStagedOutputDamaged)
	}
	return nil
}

// stagedError explains a lost or damaged staged file and the ways on. A
// restart cannot repair the file: it wraps runtime.ErrUnrecoverable.
func stagedError(id int64, err error) error {
	if !errors.Is(err, ErrStagedOutputLost) && !errors.Is(err, ErrStagedOutputDamaged) {
		return fmt.Errorf("file sink: committing checkpoint %d: %w", id, err)
	}
	return fmt.Errorf("file sink: committing checkpoint %d: %w. It was changed or deleted outside the engine, and publishing the checkpoint without it would lose its records silently. "+
		"Restore the file, or restore an older checkpoint (ingest checkpoints delete the newer ones, then run with --allow-duplicates: output after the older checkpoint is published again), "+
		"or run with --accept-lost-output to publish the rest and lose that file's records (logged) (%w)", id, err, runtime.ErrUnrecoverable)
}

// writeManifest writes m into dir and fsyncs it.
func writeManifest(dir string, m manifest) error {
	slices.SortFunc(m.Files, func(a, b manifestFile) int { return strings.Compare(a.File, b.File) })
	slices.Sort(m.Lost)
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("file sink: encoding the manifest: %w", err)
	}
	path := filepath.Join(dir, manifestName)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	_, err = io.Copy(f, bytes.NewReader(append(data, '\n')))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file sink: writing %s: %w", path, err)
	}
	return nil
}

// absDir is dir made absolute and clean, for comparing directories; dir as
// given when that fails.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return filepath.Clean(dir)
}

// Abandon deletes everything under <path>/_staging: at recovery, after the
// recovery point's commits were published, nothing left there will ever be
// published. The sink's directory belongs to the pipeline's sink (Claim).
func (c committer) Abandon(_ context.Context, _ string) (int, error) {
	staging := filepath.Join(c.dir, "_staging")
	var files []string
	err := filepath.WalkDir(staging, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("file sink: listing %s: %w", staging, err)
	}
	if len(files) == 0 {
		return 0, nil
	}
	n := len(files)
	// One file at a time, so a crash can stop the abandon halfway
	// (failpoint sink/file/mid-abandon): the next recovery deletes the rest.
	for i, f := range files {
		if i > 0 {
			if err := failpoint.Inject("sink/file/mid-abandon"); err != nil {
				return 0, err
			}
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("file sink: abandoning %s: %w", f, err)
		}
	}
	if err := os.RemoveAll(staging); err != nil {
		return 0, fmt.Errorf("file sink: abandoning %s: %w", staging, err)
	}
	return n, syncDir(c.dir)
}

// CommittedDir is where checkpoint id's output of job is published.
func CommittedDir(dir, jobID string, id int64) string {
	return filepath.Join(dir, fmt.Sprintf("ckpt-%010d-%s", id, jobID))
}

// LastCommitted returns the newest checkpoint whose output of job jobID is
// published under the sink's directory (its CommittedDir exists), 0 if none
// (runtime.CommitTracker). Empty checkpoints publish no directory, which
// does not matter: there is nothing of theirs to publish twice.
func (c committer) LastCommitted(_ context.Context, jobID, _ string) (int64, error) {
	des, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("file sink: listing published checkpoints in %s: %w", c.dir, err)
	}
	var last int64
	for _, de := range des {
		if id, ok := parseCommittedDir(de.Name(), jobID); ok && de.IsDir() {
			last = max(last, id)
		}
	}
	return last, nil
}

// parseCommittedDir returns the checkpoint id of a CommittedDir name of job
// jobID.
func parseCommittedDir(name, jobID string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "ckpt-")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, "-"+jobID); !ok || len(digits) < 10 {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id < 0 || digits[0] == '+' {
		return 0, false
	}
	return id, true
}
