package file

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingest-engine/ingest/runtime"
)

// Compression is the codec of a Parquet sink's column chunks.
type Compression int

const (
	// Snappy is fast with a moderate ratio; Spark's and Flink's default.
	Snappy Compression = iota
	// Zstd compresses better than Snappy at some CPU cost.
	Zstd
	// Gzip is the most widely readable codec and the slowest.
	Gzip
	// Uncompressed stores pages as they are.
	Uncompressed
)

// compressionNames are the names ParseCompression accepts, by Compression.
var compressionNames = []string{"snappy", "zstd", "gzip", "none"}

// String returns the name ParseCompression accepts.
func (c Compression) String() string {
	if int(c) >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression parses a codec name: snappy, zstd, gzip or none.
func ParseCompression(name string) (Compression, error) {
	if i := slices.Index(compressionNames, strings.ToLower(name)); i >= 0 {
		return Compression(i), nil
	}
	return 0, fmt.Errorf("parquet compression %q: want one of %s", name, strings.Join(compressionNames, ", "))
}

// writerOption returns the parquet-go option for c.
func (c Compression) writerOption() (parquet.WriterOption, error) {
	switch c {
	case Snappy:
		return parquet.Compression(&parquet.Snappy), nil
	case Zstd:
		return parquet.Compression(&parquet.Zstd), nil
	case Gzip:
		return parquet.Compression(&parquet.Gzip), nil
	case Uncompressed:
		return parquet.Compression(&parquet.Uncompressed), nil
	}
	return nil, fmt.Errorf("unknown parquet compression %v", c)
}

// DefaultRowGroupRows is the default number of rows per Parquet row group.
const DefaultRowGroupRows = 128 << 10

// ParquetOption configures a Parquet sink.
type ParquetOption func(*parquetConfig)

type parquetConfig struct {
	compression  Compression
	rowGroupRows int64
}

// WithCompression sets the column chunks' codec. The default value is
// Snappy.
func WithCompression(c Compression) ParquetOption {
	return func(p *parquetConfig) { p.compression = c }
}

// RowGroupRows caps the rows of one row group. A sink subtask holds the
// current row group in memory (encoded and compressed page by page) until
// it is full or the checkpoint's file is finished, so this bounds its
// memory; larger row groups read faster. n <= 0 means the default value,
// DefaultRowGroupRows (131072).
func RowGroupRows(n int64) ParquetOption {
	return func(p *parquetConfig) { p.rowGroupRows = n }
}

// writerOptions resolves opts into parquet-go writer options.
func writerOptions(opts []ParquetOption) ([]parquet.WriterOption, error) {
	cfg := parquetConfig{compression: Snappy, rowGroupRows: DefaultRowGroupRows}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.rowGroupRows <= 0 {
		cfg.rowGroupRows = DefaultRowGroupRows
	}
	codec, err := cfg.compression.writerOption()
	if err != nil {
		return nil, err
	}
	return []parquet.WriterOption{codec, parquet.MaxRowsPerRowGroup(cfg.rowGroupRows), parquet.CreatedBy("ingest", "", "")}, nil
}

// Parquet returns a sink writing records of type T as Parquet files, one
// per sink subtask per checkpoint, committed like JSONLines. The schema
// comes from T's fields and their `parquet:"name,optional,..."` struct tags
// (parquet-go's rules: exported fields; time.Time is a timestamp; pointers
// and the optional tag make a column nullable). T must be a struct or a
// pointer to one; a type parquet-go cannot map is an error here, not at run
// time.
func Parquet[T any](dir string, opts ...ParquetOption) (*Sink[T], error) {
	wopts, err := writerOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", dir, err)
	}
	if err := checkParquetType[T](wopts); err != nil {
		return nil, fmt.Errorf("file sink %s: %w", dir, err)
	}
	return &Sink[T]{dir: dir, format: parquetStructs[T]{opts: wopts}}, nil
}

// checkParquetType builds a writer for T and writes a zero value to a
// throwaway output, turning parquet-go's panics and deferred errors about
// unsupported types into an error.
func checkParquetType[T any](opts []parquet.WriterOption) (err error) {
	t := reflect.TypeFor[T]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("parquet: record type %v is not a struct", reflect.TypeFor[T]())
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet: cannot map record type %v to a schema: %v", reflect.TypeFor[T](), r)
		}
	}()
	w := parquet.NewGenericWriter[T](io.Discard, opts...)
	var zero T
	if rv := reflect.ValueOf(&zero).Elem(); rv.Kind() == reflect.Pointer {
		rv.Set(reflect.New(rv.Type().Elem()))
	}
	if _, err := w.Write([]T{zero}); err != nil {
		return fmt.Errorf("parquet: record type %v: %w", reflect.TypeFor[T](), err)
	}
	return w.Close()
}

// parquetStructs is the Parquet format of typed records.
type parquetStructs[T any] struct{ opts []parquet.WriterOption }

func (parquetStructs[T]) ext() string      { return ".parquet" }
func (parquetStructs[T]) describe() string { return "parquet" }
func (f parquetStructs[T]) newEncoder(string) encoder[T] {
	return &parquetStructEncoder[T]{w: parquet.NewGenericWriter[T](io.Discard, f.opts...)}
}

type parquetStructEncoder[T any] struct {
	w    *parquet.GenericWriter[T]
	rows []T
}

func (e *parquetStructEncoder[T]) reset(w io.Writer) { e.w.Reset(w) }

func (e *parquetStructEncoder[T]) write(b runtime.Batch[T]) error {
	e.rows = e.rows[:0]
	for _, rec := range b {
		e.rows = append(e.rows, rec.Value)
	}
	_, err := e.w.Write(e.rows)
	clear(e.rows) // let the values go
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

func (e *parquetStructEncoder[T]) finish() error {
	if err := e.w.Close(); err != nil {
		return fmt.Errorf("parquet: writing the footer: %w", err)
	}
	return nil
}
