// Package stdout is a sink that prints records as JSON lines as soon as they
// arrive. It does not stage output, so after a recovery it prints again what
// was printed after the last complete checkpoint: it is at-least-once.
package stdout

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Encoder appends one record's encoding (without the newline) to dst.
type Encoder[T any] func(dst []byte, v T) []byte

// Sink prints records of type T.
type Sink[T any] struct {
	w      io.Writer
	mu     *sync.Mutex // serialises subtasks' lines on w
	encode Encoder[T]
}

// New returns a sink printing to os.Stdout.
func New[T any](encode Encoder[T]) *Sink[T] { return NewWriter(os.Stdout, encode) }

// NewWriter returns a sink printing to w (tests).
func NewWriter[T any](w io.Writer, encode Encoder[T]) *Sink[T] {
	return &Sink[T]{w: w, mu: &sync.Mutex{}, encode: encode}
}

// Describe names the sink.
func (s *Sink[T]) Describe() string { return "stdout (JSON lines, not transactional)" }

// Committer is nil: nothing is staged.
func (s *Sink[T]) Committer() runtime.Committer { return nil }

// NewSubtask creates one printing subtask.
func (s *Sink[T]) NewSubtask() runtime.SinkSubtask[T] { return &printer[T]{sink: s} }

type printer[T any] struct {
	sink *Sink[T]
	buf  []byte
}

func (p *printer[T]) Open(*runtime.Context) error { return nil }

// BorrowsBatches implements runtime.BorrowingSink: records are encoded
// before Write returns.
func (p *printer[T]) BorrowsBatches() {}

func (p *printer[T]) Write(batch runtime.Batch[T]) error {
	p.buf = p.buf[:0]
	for _, rec := range batch {
		p.buf = p.sink.encode(p.buf, rec.Value)
		p.buf = append(p.buf, '\n')
	}
	p.sink.mu.Lock()
	defer p.sink.mu.Unlock()
	if _, err := p.sink.w.Write(p.buf); err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	if f, ok := p.sink.w.(*bufio.Writer); ok {
		return f.Flush()
	}
	return nil
}

func (p *printer[T]) ProcessWatermark(int64) error             { return nil }
func (p *printer[T]) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (p *printer[T]) NotifyComplete(int64) error               { return nil }
func (p *printer[T]) Close() error                             { return nil }

// Descriptor: the sink prints at once, so a recovery repeats what it
// printed since the restored checkpoint (at-least-once).
func (s *Sink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "stdout"}
}
