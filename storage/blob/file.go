package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fileStore is the bucket of file:// URLs: each key is a file under root, its '/'-separated
// segments directories. A put writes a temporary file in the target's directory, fsyncs it and
// renames it into place (or, for a conditional create, hard-links it, which fails if the target
// exists: atomic across processes), then fsyncs the directory.
type fileStore struct {
	root string // immutable; absolute
}

// tmpPrefix starts the names of the temporary files of puts in progress; list skips them.
const tmpPrefix = ".tmp-put-"

// openFileStore opens the directory dir, creating it unless create is false.
func openFileStore(dir string, create bool) (*fileStore, error) {
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create the directory: %w", err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return &fileStore{root: dir}, nil
}

// path returns the file of key, refusing keys that would leave root.
func (f *fileStore) path(key string) (string, error) {
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, tmpPrefix) {
			return "", fmt.Errorf("file: invalid key %q", key)
		}
	}
	return filepath.Join(f.root, filepath.FromSlash(key)), nil
}

// missing reports whether err says that a path or one of its parents does not exist.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (f *fileStore) put(ctx context.Context, key string, parts [][]byte, ifNotExist bool) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := f.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	for _, b := range parts {
		if _, err := tmp.Write(b); err != nil {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if ifNotExist {
		err = os.Link(tmp.Name(), p)
		os.Remove(tmp.Name())
		if errors.Is(err, fs.ErrExist) {
			return &driverError{kind: errExists, err: err}
		}
		if err != nil {
			return fmt.Errorf("%w (a conditional create in a file:// directory needs hard links)", err)
		}
	} else if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if statErr != nil && dir != f.root {
		// The directory is new: make its entry durable too.
		return syncDir(filepath.Dir(dir))
	}
	return nil
}

// syncDir fsyncs the directory dir, making the entries renamed or linked into it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *fileStore) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	switch {
	case missing(err) || errors.Is(err, syscall.EISDIR):
		return nil, &driverError{kind: errNotExist, err: err}
	case err != nil:
		return nil, err
	}
	return b, nil
}

func (f *fileStore) exists(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	p, err := f.path(key)
	if err != nil {
		return false, err
	}
	st, err := os.Stat(p)
	switch {
	case missing(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return st.Mode().IsRegular(), nil
}

func (f *fileStore) del(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := f.path(key)
	if err != nil {
		return err
	}
	st, err := os.Lstat(p)
	switch {
	case missing(err):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return nil // a directory is no object
	}
	if err := os.Remove(p); err != nil && !missing(err) {
		return err
	}
	return nil
}

func (f *fileStore) list(ctx context.Context, prefix string, delimiter bool) ([]listEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dirKey, namePrefix := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey, namePrefix = prefix[:i+1], prefix[i+1:]
	}
	dir := filepath.Join(f.root, filepath.FromSlash(dirKey))
	var out []listEntry
	if delimiter {
		entries, err := os.ReadDir(dir)
		if missing(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, namePrefix) || strings.HasPrefix(name, tmpPrefix) {
				continue
			}
			switch {
			case e.IsDir():
				out = append(out, listEntry{key: dirKey + name + "/", isDir: true})
			case e.Type().IsRegular():
				out = append(out, listEntry{key: dirKey + name})
			}
		}
		return out, nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil // removed meanwhile
			}
			return err
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(f.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			out = append(out, listEntry{key: key})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *fileStore) close() error { return nil }
