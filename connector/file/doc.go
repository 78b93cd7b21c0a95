// Package file is the file connector: a replayable source that reads JSON
// Lines and CSV files matching a glob (NewSource), and a two-phase-commit
// sink that writes JSON Lines (New, JSONLines) or Parquet (Parquet,
// ParquetRows).
//
// # Sink
//
// Each sink subtask appends records to a staging file under
// <path>/_staging/pending/, invisible to readers (committed output is every
// file under <path> whose path components do not begin with '_' or '.'). At
// a checkpoint barrier the subtask finishes the file (for Parquet: writes the
// footer), flushes, fsyncs and closes it (prepare) and reports it as a
// committable. When the checkpoint is complete, one committer moves all of
// that checkpoint's files, from every subtask, into
// <path>/_staging/commit-<job>-<N>/ and publishes them with one directory
// rename to <path>/ckpt-<N>-<job>/: readers see all of the checkpoint's
// output or none of it. Committing again finds the directory and does
// nothing, so re-commits after a crash publish nothing twice. The format
// only changes how one staging file is encoded: one JSON value per line
// (.jsonl), or one Parquet file (.parquet) per subtask per checkpoint,
// whose row groups are cut every RowGroupRows rows.
//
// # Source: files
//
// The source reads the regular files matching SourceConfig.Path
// (filepath.Glob syntax: *, ? and [...] within one path component; no **).
// A file whose name, or any directory the pattern matched with a wildcard,
// begins with '.' or '_' is skipped, so in-progress files (".x.tmp") and a
// file sink's staging directory are not read. Writers should append whole
// lines, or write a file elsewhere (or under a hidden name) and rename it
// in.
//
// Records are lines (JSON Lines: one JSON value per line; CSV: RFC 4180
// records, which may span lines inside quotes, under a header record).
// Blank lines are skipped, a UTF-8 byte order mark at the start of a file
// is skipped, and \r\n ends a line like \n. A record is handed to the
// Decoder as a Line with its path, line number and byte offset; decode
// errors, CSV records with the wrong number of fields and records longer
// than MaxLineBytes fail the subtask with an error naming
// path:line (byte offset N), unless a bad-record policy (stream.OnBadRecords)
// skips them. A CSV record that is malformed or longer than the limit ends,
// as a bad record, at the first line break after its start, and reading
// resumes on the next line: a quoted field is bounded by the limit, so an
// unterminated quote makes one line bad, not the rest of the file.
//
// # Source: file identity, replacement and rotation
//
// A file's path is not its identity: a path can come to name another file.
// A file is identified by its device and inode numbers, its size when first
// seen (it may only grow) and a CRC-32C of its first bytes (up to 1 KiB,
// extended as the file grows to that), taken when the source first sees it
// and stored in the position. The identity is checked on restore, at every
// poll and every time the file is opened; what the source then finds:
//
//   - Appended to (the supported pattern): read on from the offset.
//   - Renamed to a name the glob also matches (rename-then-create rotation:
//     app.log → app.log.1 or app-2026-01-02.log, then a new app.log): the
//     renamed file is read on from its offset under its new name, as the
//     same watermark split, and the new file under the old name is read from
//     its start. Numbered rotation (app.log.1 → app.log.2, the oldest
//     deleted) works the same way.
//   - Replaced under its path (mv of another file over it; or rotation to a
//     name the glob does not match, which the source cannot tell from a
//     replacement once the new file is there): with OnReplace ReplaceFail,
//     the default, an error naming the file, the offset read and both
//     identities; with ReplaceReread the file now under the path is read
//     from its start (with stop_at latest, to its size then), and a
//     warning names the one it replaced. A rotated
//     file that is open when this is found is read to its end through the
//     open file first; one that had been read to its end when the source
//     last looked is forgotten, nothing lost. Bytes a writer appended to it
//     after that look and before the rotation cannot be read (the source
//     cannot tell whether there were any): rotate after the last write, or
//     rotate to a name the glob matches.
//   - Truncated (shorter than what was read), or rewritten in place (other
//     first bytes): ReplaceFail stops with an error naming the file;
//     ReplaceReread reads it again from its start. copytruncate rotation is
//     therefore not supported.
//   - Deleted (or renamed out of the glob with no file under its path):
//     forgotten if it had been read to its end at the last look (also when
//     that is found on restore); else an error, since its unread bytes can
//     no longer be read.
//
// Two names of one file (hard links) are read once. A restore compares
// inode numbers, sizes and first bytes, not device numbers, which a remount
// may change; a restore on a filesystem that renumbers inodes (a copy of the
// files to another machine) finds every file replaced. Where the platform
// has no inode numbers files are known by path and first bytes, and
// renamed files are not followed. A position written before identities
// existed (format version 1) is restored as it is: each file under its path
// is taken as the file read, and its identity recorded from then on.
//
// # Source: split over subtasks
//
// A file belongs to the subtask that owns key group
// KeyGroupFor(HashKey(inode number), max parallelism), the rule keyed state
// uses. The assignment depends only on the file and the parallelism, never
// on which other files exist or what the file is called, so files that
// appear later never move the files already assigned, and a renamed file
// stays with the subtask reading it. Few files can spread unevenly (three
// files may hash to two subtasks): give the source more files than
// subtasks. A job restored from a version 1 position goes on assigning
// files by the hash of their path (as version 1 did), so that no file
// changes subtask; a file renamed to a path another subtask owns then stops
// the source with an error (that subtask would read it again): restore such
// a job at parallelism 1 to follow rotations.
//
// # Source: replay position and rescaling
//
// Each subtask's position, stored in the checkpoint as inline JSON at every
// barrier, lists its files, each with its identity, the byte offset after
// the last record it emitted, the lines before that offset, where a CSV
// header ends, the newest event time read (which restores the file's
// watermark), whether it had been read to its end and, with stop_at latest,
// the size to read to; and the inode numbers of the other subtasks' files
// it saw, to tell a rotation from a replacement on restore. A restored
// subtask finds every file by its identity and continues it from its offset;
// bytes after it, including a partial last line, are read again.
//
// Rescaling: the runtime refuses to restore inline state at a changed
// parallelism, so a job restored with another source parallelism stops with
// an error naming the node. The position is ready for more: its entries are
// per file and a subtask ignores entries of files it does not own, so a
// runtime that handed every new subtask the union of the old subtasks'
// positions (Flink's union list state) would rescale correctly.
//
// # Source: following and stop_at latest
//
// Following (StopAt StopNever), a subtask evaluates the glob again and
// checks the files it has read to their end for growth every PollInterval.
// A last line without its line break is not consumed until it is complete.
// The source never ends by itself; stop the job to end it.
//
// With StopAtLatest the files, their identities and their sizes are taken
// once, at the job's first start, and stored in the position, so a restart
// reads the same files to the same ends (following them if renamed within
// the glob, refusing them if replaced) and ignores files that appeared
// since. The subtask reads the files to
// those sizes, treating a last line without a line break as a line, and
// then reports Exhausted; the job ends with a final checkpoint.
//
// # Source: watermarks
//
// Every file is a split of a watermark.Tracker: the subtask's watermark is
// the least over its files of (newest event time - max_delay - 1ns), and a
// file that has produced nothing holds it at the minimum. With stop_at
// latest a file read to its end is finished and no longer holds the
// watermark back. Following, a file is never known to be complete: a quiet
// file holds the watermark until Watermark.IdleTimeout makes it idle, and
// its next record may then be late. A file is idle once it produced nothing
// for IdleTimeout and a look after that found it at its end (a read that
// reached the end, or a poll that found it not grown); polls come at least
// every IdleTimeout/2 then, to keep it idle. A file the subtask did not get
// to read (a stall of the engine, max_open_files) is never idle. A file
// that appears later holds the watermark from then until it produces, and
// its records may be late.
// Within a file, records later than max_delay behind the file's newest are
// late downstream.
package file
