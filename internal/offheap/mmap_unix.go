//go:build unix

package offheap

import "syscall"

// mapAnon maps n bytes of private anonymous memory, zeroed and backed only
// as it is written.
func mapAnon(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

// release gives b's pages back to the kernel, keeping the mapping: later
// reads see zeros. It cannot fail for a mapping of ours; if it did, the
// pages would stay resident (memory, not a fault).
func release(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }
