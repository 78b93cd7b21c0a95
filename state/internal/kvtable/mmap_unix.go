//go:build unix

package kvtable

import "syscall"

// mmapAnon maps n bytes of private anonymous memory, zeroed and backed
// only as it is written.
func mmapAnon(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

// munmap unmaps a chunk mmapAnon returned. It cannot fail for a mapping
// of ours; if it did, the memory would stay mapped (a leak, not a fault).
func munmap(c []byte) { _ = syscall.Munmap(c) }
