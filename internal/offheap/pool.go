// Package offheap lends byte buffers mapped outside the Go heap for large,
// transient encodings: a checkpoint's state file is built in one buffer,
// tens to hundreds of megabytes at millions of keys. On the Go heap such a
// buffer grows by doubling (copying, and faulting in fresh pages each
// time) and, being part of the live heap while it is written, raises the
// garbage collector's heap goal by twice its size (GOGC=100). A pooled
// mapping is reused from one checkpoint to the next with its pages already
// faulted in, and the collector never sees it.
//
// A buffer is never unmapped: a reader that outlives its use (an HTTP
// transport still reading a request body after RoundTrip returned, which
// net/http allows) reads old bytes or zeros, never unmapped memory. Memory
// goes back to the kernel with madvise(MADV_DONTNEED) instead, when a
// buffer is too small for what is asked now.
package offheap

import (
	"slices"
	"sync"
)

// align is the granularity of mapped buffers.
const align = 1 << 20

// Pool lends mapped buffers. The zero value is ready to use; it is safe for
// concurrent use.
type Pool struct {
	mu sync.Mutex
	// free holds the mapped buffers not lent, each at full length.
	// INVARIANT: no buffer in free is lent, and every lent buffer came
	// from map (directly or through free).
	free [][]byte
}

// Get returns a buffer of length 0 and capacity at least n, mapped outside
// the Go heap, or nil where the platform maps no anonymous memory or n is
// under a mapping's granularity (the caller then appends to nil: the Go
// heap). Give it back with Put once nothing reads it any more.
func (p *Pool) Get(n int) []byte {
	if n < align {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, b := range p.free {
		if len(b) >= n && (best < 0 || len(b) < len(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
		return b[:0]
	}
	// None fits: the ones too small give their memory back (their sizes
	// are of the past), and a new one leaves room to grow: twice n, which
	// costs address space only (a page is backed once written).
	for _, b := range p.free {
		release(b)
	}
	size := (2*n + align - 1) / align * align
	b, err := mapAnon(size)
	if err != nil {
		return nil
	}
	return b[:0]
}

// Put gives back a buffer Get returned (any length; nil is ignored). Its
// pages stay resident for the next Get.
func (p *Pool) Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, b[:cap(b)])
}
