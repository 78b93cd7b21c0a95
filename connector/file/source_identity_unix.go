//go:build unix

package file

import (
	"io/fs"
	"syscall"
)

// keyOf returns the device and inode numbers of fi.
func keyOf(fi fs.FileInfo) fileKey {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == 0 {
		return fileKey{}
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), ok: true}
}
