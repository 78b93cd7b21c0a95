package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ingest-engine/ingest/storage"
)

// VerifyLSM checks, for a recovery's verification pass, that every data
// file an LSM manifest names is intact, before anything of the checkpoint is
// used: a file whose local copy (kept by an earlier run of job on this
// machine, see RestoreLSM) has the recorded size and CRC-32C, and that
// storage still holds (StatFile: the next checkpoints reference it instead
// of storing it again, so a copy only on this machine is not enough),
// counts as verified; any other is read from files, which verifies its
// checksum, and
// kept in the job's fetch directory so that the restore that follows links
// it instead of reading it again (the runtime removes the directory with
// ClearFetched once every subtask is restored). It returns the manifest's
// data files' handles.
//
// A file that is missing or damaged in storage fails it with the storage
// error (wrapping storage.ErrNotFound or storage.ErrCorrupt), which names
// the file; a manifest that does not verify, with one wrapping ErrCorrupt.
func VerifyLSM(ctx context.Context, opts LSMOptions, job string, files Files, manifest []byte) ([]storage.Handle, error) {
	m, err := decodeLSMManifest(manifest, "LSM state manifest")
	if err != nil {
		return nil, err
	}
	jobDir := filepath.Join(opts.Dir, pathSafe(job))
	local := filepath.Join(backendDir(jobDir, m.operator, m.kgRange), fmt.Sprintf("ckpt-%d", m.checkpoint))
	fetched := filepath.Join(jobDir, fetchedDirName)
	if err := os.MkdirAll(fetched, 0o755); err != nil {
		return nil, fmt.Errorf("state: creating the fetch directory: %w", err)
	}
	err = parallel(ctx, len(m.files), func(i int) error {
		f := m.files[i]
		named := func(err error) error {
			from := "written by that checkpoint"
			if f.handle.Checkpoint != m.checkpoint {
				from = fmt.Sprintf("written by checkpoint %d, which checkpoint %d's incremental state builds on", f.handle.Checkpoint, m.checkpoint)
			}
			return fmt.Errorf("data file %s of operator %q (%s): %w", f.handle.Name, m.operator, from, err)
		}
		if sameFile(filepath.Join(local, f.local), f) || sameFile(fetchedPath(fetched, f.handle), f) {
			if err := files.StatFile(ctx, f.handle); err != nil {
				return named(err)
			}
			return nil
		}
		data, err := files.ReadFile(ctx, f.handle)
		if err != nil {
			return named(err)
		}
		// A temporary file of its own: subtasks are verified in parallel,
		// and two that fetch the same file each rename a whole copy.
		p := fetchedPath(fetched, f.handle)
		tmp, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".*.tmp")
		if err != nil {
			return fmt.Errorf("state: keeping a verified file: %w", err)
		}
		_, werr := tmp.Write(data)
		if werr == nil {
			werr = tmp.Chmod(0o644) // as the files it is kept beside
		}
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), p)
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("state: keeping a verified file: %w", werr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m.handles(), nil
}

// fetchedDirName is the directory, in a job's LSM directory, of the data
// files a recovery's verification read from storage.
const fetchedDirName = "fetched"

// fetchedPath is where the verification pass keeps the stored file h.
func fetchedPath(fetched string, h storage.Handle) string {
	return filepath.Join(fetched, fmt.Sprintf("%d-%s", h.Checkpoint, pathSafe(h.Name)))
}

// ClearFetched removes the data files the verification pass kept (see
// VerifyLSM): every backend restored from them has linked what it needed.
func (e *LSMEnv) ClearFetched() error {
	if err := os.RemoveAll(filepath.Join(e.dir, fetchedDirName)); err != nil {
		return fmt.Errorf("state: removing fetched state files: %w", err)
	}
	return nil
}

// backendDir is the directory of the LSM backend of operator's subtask
// owning kgRange, in the job directory jobDir.
func backendDir(jobDir, operator string, kgRange KeyGroupRange) string {
	return filepath.Join(jobDir, pathSafe(operator), fmt.Sprintf("kg-%d-%d", kgRange.Start, kgRange.End))
}
