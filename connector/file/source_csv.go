package file

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// errIncomplete says the buffered bytes end inside a record: the record is
// consumed once the rest of it has been written.
var errIncomplete = errors.New("incomplete record")

// csvRecord is the parse of one CSV record: the fields' unescaped bytes
// back to back and where each ends. It is reused from record to record.
type csvRecord struct {
	text []byte
	ends []int
	// fields are the strings handed to decoders; reused, see Line.Fields.
	fields []string
}

// parse parses the record at the start of data (RFC 4180: fields separated
// by comma, optionally in double quotes with "" for a quote; a quoted field
// may hold commas and line breaks; records end at \n or \r\n). With final,
// the end of data ends the record; otherwise a record that reaches the end
// of data returns errIncomplete. It returns the bytes the record spans with
// its terminator and the line breaks it spans (its terminator included). On
// a syntax error n is where in data the error was found, outside any quoted
// field (len(data) for a quoted field still open at the end of the file);
// the reader takes a bad record to end at the first line break after its
// start, wherever the error was found.
func (r *csvRecord) parse(data []byte, comma byte, final bool) (n, lines int, err error) {
	r.text, r.ends = r.text[:0], r.ends[:0]
	i := 0
	for field := 1; ; field++ {
		if i < len(data) && data[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(data[i:], '"')
				if j < 0 {
					if final {
						return len(data), 0, fmt.Errorf("field %d: quoted field is not closed at the end of the file", field)
					}
					return 0, 0, errIncomplete
				}
				r.text = append(r.text, data[i:i+j]...)
				lines += bytes.Count(data[i:i+j], []byte{'\n'})
				i += j + 1
				if i < len(data) && data[i] == '"' {
					r.text = append(r.text, '"')
					i++
					continue
				}
				if i == len(data) && !final {
					return 0, 0, errIncomplete // the next byte may be a second quote
				}
				break
			}
			r.ends = append(r.ends, len(r.text))
			switch {
			case i == len(data):
				return i, lines, nil
			case data[i] == comma:
				i++
				continue
			case data[i] == '\n':
				return i + 1, lines + 1, nil
			case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
				return i + 2, lines + 1, nil
			case data[i] == '\r' && i+1 == len(data):
				if !final {
					return 0, 0, errIncomplete
				}
				return i + 1, lines, nil
			}
			return i, 0, fmt.Errorf("field %d: unexpected %q after a closing quote", field, data[i])
		}
		j := i
		for j < len(data) && data[j] != comma && data[j] != '\n' {
			j++
		}
		if j == len(data) && !final {
			return 0, 0, errIncomplete
		}
		end := j
		if (j == len(data) || data[j] == '\n') && end > i && data[end-1] == '\r' {
			end--
		}
		if q := bytes.IndexByte(data[i:end], '"'); q >= 0 {
			return i + q, 0, fmt.Errorf("field %d: bare \" in a field not in quotes", field)
		}
		r.text = append(r.text, data[i:end]...)
		r.ends = append(r.ends, len(r.text))
		switch {
		case j == len(data):
			return j, lines, nil
		case data[j] == '\n':
			return j + 1, lines + 1, nil
		}
		i = j + 1
	}
}

// strings returns the fields as strings sharing one allocation.
func (r *csvRecord) strings() []string {
	s := string(r.text)
	r.fields = r.fields[:0]
	start := 0
	for _, e := range r.ends {
		r.fields = append(r.fields, s[start:e])
		start = e
	}
	return r.fields
}

// CSVHeader is the header of one CSV file as a source reads it.
type CSVHeader struct {
	// Path is the file's path as the glob matched it.
	Path string
	// Names are the header's column names; nil when the file has no
	// complete header yet (it is checked when the source reads it).
	Names []string
	// Err is why the header could not be read: the file is gone, a CSV
	// syntax error, a header longer than the record size limit.
	Err error
}

// CSVHeaders reads the header of every file the source that cfg
// configures would read now (hidden files skipped), in path order, with the
// source's own reader: a byte order mark and blank lines before the header
// are skipped. The size limit of the header is maxRecordBytes when it is
// positive (as a bad-record policy's MaxRecordBytes replaces it in the
// source), else cfg.MaxLineBytes. The YAML layer checks declared fields
// against the headers before the job starts.
func CSVHeaders(cfg SourceConfig, maxRecordBytes int) ([]CSVHeader, error) {
	cfg.Format = FormatCSV
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	r := &reader[struct{}]{cfg: &cfg, maxLine: cfg.MaxLineBytes, limitName: "max_line_bytes", headerOnly: true}
	if maxRecordBytes > 0 {
		r.maxLine, r.limitName = maxRecordBytes, "max_record_bytes"
	}
	r.patternParts = strings.Split(filepath.ToSlash(cfg.Path), "/")
	l, err := r.look()
	if err != nil {
		return nil, err
	}
	out := make([]CSVHeader, 0, len(l.files))
	for _, m := range l.files {
		h := CSVHeader{Path: m.path}
		h.Names, h.Err = r.header(m.path, m.size)
		out = append(out, h)
	}
	return out, nil
}

// header reads the header of the CSV file at path, size bytes long, as
// nextLine does (a last line without a line break ends the header); nil
// when the file has none yet.
func (r *reader[T]) header(path string, size int64) ([]string, error) {
	s := &split{path: path, end: size}
	defer s.release()
	for {
		_, ok, err := r.nextLine(s)
		switch {
		case s.header != nil:
			return s.header.Names, nil
		case errors.Is(err, errMoved):
			return nil, fmt.Errorf("file source: reading the header of %s: %w", path, fs.ErrNotExist)
		case err != nil:
			return nil, err
		case !ok:
			return nil, nil
		}
	}
}
