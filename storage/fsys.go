package storage

import (
	"io"
	"io/fs"
	"os"
)

// FS is every filesystem call Local makes (NewLocalFS). It exists so tests can record the order of
// writes, fsyncs and renames, inject failures at any call, and simulate a power loss
// (storagetest.CrashFS, storagetest.FaultFS); osFS is the real one.
type FS interface {
	MkdirAll(path string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(path string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	ReadFile(name string) ([]byte, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir fsyncs the directory name, making the creation, removal and renaming of its entries
	// durable.
	SyncDir(name string) error
}

// File is an open file being written.
type File interface {
	io.Writer
	// Sync makes the file's contents durable.
	Sync() error
	Close() error
}

// osFS is FS on the operating system's filesystem.
type osFS struct{}

// OSFS returns the operating system's filesystem, the one NewLocal uses.
func OSFS() FS { return osFS{} }

func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not f: a nil *os.File in a File interface would not be nil
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error       { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                { return os.RemoveAll(path) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) ReadFile(name string) ([]byte, error)       { return os.ReadFile(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
