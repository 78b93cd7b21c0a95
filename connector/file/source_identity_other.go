//go:build !unix

package file

import "io/fs"

// keyOf reports no inode numbers: files are known by path and content (a
// rotated file is not followed under its new name).
func keyOf(fs.FileInfo) fileKey { return fileKey{} }
