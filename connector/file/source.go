package file

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// Format is the encoding of the files a Source reads.
type Format string

const (
	// FormatJSONLines is one JSON value per line (blank lines are skipped).
	FormatJSONLines Format = "jsonl"
	// FormatCSV is RFC 4180 CSV whose first record is the header (blank
	// lines are skipped; every record must have the header's number of
	// fields).
	FormatCSV Format = "csv"
)

// StopAt says when a Source ends.
type StopAt string

const (
	// StopNever follows the files: new files and appended lines are read
	// as they come, and the source never ends by itself.
	StopNever StopAt = ""
	// StopAtLatest reads the files present at the job's first start up to
	// their sizes then, and ends.
	StopAtLatest StopAt = "latest"
)

// ReplacePolicy says what a Source does when the path of a file it reads
// comes to name another file, or the file is truncated or rewritten.
type ReplacePolicy string

const (
	// ReplaceFail stops the source with an error naming the file: the
	// source cannot tell a new file from a rewritten copy of the old one,
	// whose records reading it from the start would repeat.
	ReplaceFail ReplacePolicy = "fail"
	// ReplaceReread reads the file now under the path from its start, as a
	// new file, and logs a warning about the one it replaces.
	ReplaceReread ReplacePolicy = "reread"
)

// Defaults of SourceConfig.
const (
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 1024
	DefaultMaxLineBytes = 1 << 20
	DefaultMaxOpenFiles = 64
)

// SourceConfig configures a file source.
type SourceConfig struct {
	// Path is the glob of the files to read (filepath.Glob syntax). It is
	// required.
	Path string
	// Format is the files' encoding. The default value is FormatJSONLines.
	Format Format
	// StopAt says when the source ends. The default value is StopNever
	// (follow the files).
	StopAt StopAt
	// PollInterval is how often a following source looks for new files and
	// for growth of files it has read to their end. Shorter finds data
	// sooner and costs a glob and a stat per file each time.
	// The default value is 1s.
	PollInterval time.Duration
	// BatchSize is the most records one Read emits; a Read reads from one
	// file. The default value is 1024.
	BatchSize int
	// MaxLineBytes bounds a record's size: a longer one is an error naming
	// the file and line (a file that is not line-oriented would otherwise
	// be buffered whole). The default value is 1 MiB.
	MaxLineBytes int
	// MaxOpenFiles bounds the files a subtask holds open at once; it reads
	// them round-robin, a batch each, and opens others as these reach their
	// ends. The default value is 64.
	MaxOpenFiles int
	// Comma is the CSV field separator, an ASCII character other than a
	// quote or a line break. The default value is ','.
	Comma rune
	// OnReplace says what happens when a file is replaced under its path
	// (the path names another file: mv of a new file over it, rotation to a
	// name the glob does not match), truncated, or rewritten in place. A file
	// renamed to a name the glob matches is followed under its new name
	// whatever OnReplace says. The default value is ReplaceFail.
	OnReplace ReplacePolicy
	// Watermark is the watermark strategy, applied per file.
	Watermark watermark.Strategy
}

// withDefaults fills unset fields and validates the combination.
func (c SourceConfig) withDefaults() (SourceConfig, error) {
	if c.Format == "" {
		c.Format = FormatJSONLines
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.Comma == 0 {
		c.Comma = ','
	}
	if c.OnReplace == "" {
		c.OnReplace = ReplaceFail
	}
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path is required: a glob of the files to read"))
	} else if _, err := filepath.Match(c.Path, ""); err != nil {
		errs = append(errs, fmt.Errorf("path %q is not a valid glob: %w", c.Path, err))
	} else {
		c.Path = filepath.Clean(c.Path)
	}
	if c.Format != FormatJSONLines && c.Format != FormatCSV {
		errs = append(errs, fmt.Errorf("format %q: want %s or %s", c.Format, FormatJSONLines, FormatCSV))
	}
	if c.StopAt != StopNever && c.StopAt != StopAtLatest {
		errs = append(errs, fmt.Errorf("stop_at %q: want %s or nothing (follow the files)", c.StopAt, StopAtLatest))
	}
	if c.OnReplace != ReplaceFail && c.OnReplace != ReplaceReread {
		errs = append(errs, fmt.Errorf("on_replace %q: want %s or %s", c.OnReplace, ReplaceFail, ReplaceReread))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("poll_interval %v must be positive", c.PollInterval))
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("batch_size %d must be positive", c.BatchSize))
	}
	if c.MaxLineBytes < 0 {
		errs = append(errs, fmt.Errorf("max_line_bytes %d must be positive", c.MaxLineBytes))
	}
	if c.MaxOpenFiles < 0 {
		errs = append(errs, fmt.Errorf("max_open_files %d must be positive", c.MaxOpenFiles))
	}
	if c.Comma >= 0x80 || c.Comma == '"' || c.Comma == '\n' || c.Comma == '\r' {
		errs = append(errs, fmt.Errorf("comma %q must be an ASCII character other than a quote or a line break", c.Comma))
	}
	if err := c.Watermark.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Source reads records of type T from files; it implements stream.Source[T].
type Source[T any] struct {
	cfg    SourceConfig
	decode Decoder[T]
}

// NewSource returns a source reading the files cfg selects, turning each
// record into a T and its event time with decode (see DecodeJSON and
// WithEventTime). decode is called from every subtask's goroutine: it must
// be safe for concurrent use.
func NewSource[T any](cfg SourceConfig, decode Decoder[T]) (*Source[T], error) {
	cfg, err := cfg.withDefaults()
	if decode == nil {
		err = errors.Join(err, errors.New("a decoder is required"))
	}
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	return &Source[T]{cfg: cfg, decode: decode}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Source[T]) Config() SourceConfig { return s.cfg }

// Describe names the glob, the format, when the source stops and, when it
// is not the default, what it does with a replaced file.
func (s *Source[T]) Describe() string {
	stop := fmt.Sprintf("following, polling every %v", s.cfg.PollInterval)
	if s.cfg.StopAt == StopAtLatest {
		stop = "stop_at latest"
	}
	if s.cfg.OnReplace == ReplaceReread {
		stop += ", on_replace reread"
	}
	return fmt.Sprintf("file %s (%s, %s)", s.cfg.Path, s.cfg.Format, stop)
}

// NewSubtask creates one reader subtask.
func (s *Source[T]) NewSubtask() runtime.SourceSubtask[T] { return &reader[T]{src: s} }
