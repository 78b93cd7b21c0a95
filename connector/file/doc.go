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
// file sink's staging directory are not read. A file is identified by its
// path as matched, and the source assumes files are only appended to: a
// file renamed into the glob is a new file; a file that shrinks below what
// was read is an error; a file deleted (after it was read to its end) and
// created again under the same path is read from the start. Writers should
// append whole lines, or write a file elsewhere and rename it in.
//
// Records are lines (JSON Lines: one JSON value per line; CSV: RFC 4180
// records, which may span lines inside quotes, under a header record).
// Blank lines are skipped, a UTF-8 byte order mark at the start of a file
// is skipped, and \r\n ends a line like \n. A record is handed to the
// Decoder as a Line with its path, line number and byte offset; decode
// errors, CSV records with the wrong number of fields and records longer
// than MaxLineBytes fail the subtask with an error naming
// path:line (byte offset N).
//
// # Source: split over subtasks
//
// A file belongs to the subtask that owns key group
// KeyGroupFor(HashKey(path), max parallelism), the rule keyed state uses.
// The assignment depends only on the path and the parallelism, never on
// which other files exist, so files that appear later never move the files
// already assigned. Few files can spread unevenly (three files may hash to
// two subtasks): give the source more files than subtasks.
//
// # Source: replay position and rescaling
//
// Each subtask's position, stored in the checkpoint as inline JSON at every
// barrier, lists its files, each with the byte offset after the last record
// it emitted, the lines before that offset, where a CSV header ends, the
// newest event time read (which restores the file's watermark) and, with
// stop_at latest, the size to read to. A restored subtask continues every
// file from its offset; bytes after it, including a partial last line, are
// read again.
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
// With StopAtLatest the files and their sizes are taken once, at the job's
// first start, and stored in the position, so a restart reads to the same
// end and ignores files that appeared since. The subtask reads the files to
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
