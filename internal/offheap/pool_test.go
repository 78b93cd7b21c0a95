package offheap

import (
	"sync"
	"testing"
)

// A buffer given back is lent again for a request it fits, with its bytes
// still there (no new mapping); a larger request gets a new, larger one;
// small requests go to the Go heap.
func TestPoolReusesBuffers(t *testing.T) {
	var p Pool
	if b := p.Get(align - 1); b != nil {
		t.Fatalf("a request under %d bytes got a mapped buffer of %d", align, cap(b))
	}
	b := p.Get(3 * align)
	if b == nil {
		t.Skip("no anonymous mappings on this platform")
	}
	if len(b) != 0 || cap(b) < 3*align {
		t.Fatalf("Get(3 MiB) = len %d cap %d", len(b), cap(b))
	}
	b = append(b, "state"...)
	first := &b[:1][0]
	p.Put(b)
	c := p.Get(2 * align)
	if &c[:1][0] != first || string(c[:5]) != "state" {
		t.Fatal("a buffer given back was not lent again for a request it fits")
	}
	d := p.Get(3 * align) // c is lent: a new mapping
	if cap(d) < 3*align || &d[:1][0] == first {
		t.Fatal("two lent buffers share memory")
	}
	p.Put(c)
	p.Put(d)
	e := p.Get(8 * align) // neither fits: both released, a new one
	if cap(e) < 8*align {
		t.Fatalf("Get(8 MiB) = cap %d", cap(e))
	}
	f := p.Get(2 * align) // a released one is still lent (zeros or old bytes, never a fault)
	if cap(f) < 2*align || &f[:1][0] == &e[:1][0] {
		t.Fatal("a released buffer was not lent again, or two lent buffers share memory")
	}
	f = append(f, make([]byte, 2*align)...) // writable
	p.Put(e)
	p.Put(f)
}

// Concurrent borrowers never share a buffer (-race, and the contents).
func TestPoolConcurrent(t *testing.T) {
	var p Pool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				b := p.Get(align + i*1000)
				if b == nil {
					return
				}
				b = b[:align]
				for j := range b {
					b[j] = byte(g)
				}
				for j := range b {
					if b[j] != byte(g) {
						t.Errorf("borrower %d found %d in its buffer", g, b[j])
						return
					}
				}
				p.Put(b)
			}
		})
	}
	wg.Wait()
}
