package storagetest

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// CrashFS is an in-memory filesystem that models what survives a power loss, for durability tests
// of code that uses storage (after Pebble's vfs.MemFS and its CrashClone). A file's contents survive
// as of its last fsync, and a directory's entries (creations, removals, renames) as of that
// directory's last fsync; nothing else is guaranteed, and Crash assumes nothing else survives.
//
// Use NewLocal to put a storage.Local on it and Crash to get the filesystem a restarted process would find.
// It is safe for concurrent use.
type CrashFS struct {
	m *memFS // immutable
}

// NewCrashFS returns an empty filesystem: only the root directory "/" exists.
func NewCrashFS() *CrashFS { return &CrashFS{m: newMemFS()} }

// NewLocal returns a storage.Local storing checkpoints in directory dir of c.
func (c *CrashFS) NewLocal(dir string) (*storage.Local, error) { return storage.NewLocalFS(dir, c.m) }

// Crash returns a new filesystem holding only what is guaranteed to survive a power loss now: file
// contents as of their last fsync and directory entries as of their directory's last fsync. c itself
// is unchanged.
func (c *CrashFS) Crash() *CrashFS {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return &CrashFS{m: &memFS{root: durable(c.m.root, false)}}
}

// memFS is the storage.FS behind CrashFS: a tree of memNodes that remembers, besides the current state,
// the state as of the last fsync of each file and directory.
type memFS struct {
	mu   sync.Mutex
	root *memNode // guarded by mu

	// The fields below are for this package's tests.
	trace  bool                        // guarded by mu; keep log
	log    []string                    // guarded by mu; mutating calls in order, e.g. "sync /ck/chk-0000000001/a"
	fail   func(op, path string) error // guarded by mu; a non-nil result fails the call before it acts
	drop   func(op, path string) bool  // guarded by mu; true makes a sync or syncdir do nothing (a lying disk)
	record bool                        // guarded by mu; take crash images after every mutating call
	images []crashImage                // guarded by mu
}

// crashImage is what would survive a crash right after call op.
type crashImage struct {
	op string
	// lose assumes nothing unsynced survives; keep assumes every directory change survives while file
	// contents are still only as of their last fsync (the reordering journaling filesystems allow).
	lose, keep *memFS
}

// memNode is a file or a directory.
// INVARIANT: exactly one of data/synced (files) and entries/syncedEntries (directories) is in use.
type memNode struct {
	dir                    bool
	data, synced           []byte
	entries, syncedEntries map[string]*memNode
}

func newDirNode() *memNode {
	return &memNode{dir: true, entries: map[string]*memNode{}, syncedEntries: map[string]*memNode{}}
}

// newMemFS returns an empty filesystem.
func newMemFS() *memFS { return &memFS{root: newDirNode()} }

// durable returns a copy of n as it would be after a crash. With keepNames, directory entries are
// taken as they are now rather than as of the last fsync.
func durable(n *memNode, keepNames bool) *memNode {
	if !n.dir {
		return &memNode{data: slices.Clone(n.synced), synced: slices.Clone(n.synced)}
	}
	src := n.syncedEntries
	if keepNames {
		src = n.entries
	}
	out := newDirNode()
	for name, child := range src {
		d := durable(child, keepNames)
		out.entries[name] = d
		out.syncedEntries[name] = d
	}
	return out
}

// callLocked consults the failure hook for op on path.
func (c *memFS) callLocked(op, path string) error {
	if c.fail != nil {
		if err := c.fail(op, path); err != nil {
			return &fs.PathError{Op: op, Path: path, Err: err}
		}
	}
	return nil
}

// loggedLocked records a mutating call that happened.
func (c *memFS) loggedLocked(entry string) {
	if c.trace {
		c.log = append(c.log, entry)
	}
	if c.record {
		c.images = append(c.images, crashImage{
			op:   entry,
			lose: &memFS{root: durable(c.root, false)},
			keep: &memFS{root: durable(c.root, true)},
		})
	}
}

// split returns the components of path; none for the root.
func split(path string) []string {
	p := strings.Trim(filepath.ToSlash(filepath.Clean(path)), "/")
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// lookupLocked returns the node at path.
func (c *memFS) lookupLocked(op, path string) (*memNode, error) {
	n := c.root
	for _, part := range split(path) {
		if !n.dir {
			return nil, &fs.PathError{Op: op, Path: path, Err: errors.New("not a directory")}
		}
		child, ok := n.entries[part]
		if !ok {
			return nil, &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
		}
		n = child
	}
	return n, nil
}

// parentLocked returns the directory holding path and path's last component.
func (c *memFS) parentLocked(op, path string) (*memNode, string, error) {
	parts := split(path)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: path, Err: fs.ErrInvalid}
	}
	dir, err := c.lookupLocked(op, filepath.Dir(filepath.Clean(path)))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", &fs.PathError{Op: op, Path: path, Err: errors.New("not a directory")}
	}
	return dir, parts[len(parts)-1], nil
}

// The methods below implement storage.FS; each consults fail before acting and logs what it changed.

func (c *memFS) MkdirAll(path string, _ fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("mkdir", path); err != nil {
		return err
	}
	n := c.root
	for _, part := range split(path) {
		child, ok := n.entries[part]
		if !ok {
			child = newDirNode()
			n.entries[part] = child
		} else if !child.dir {
			return &fs.PathError{Op: "mkdir", Path: path, Err: errors.New("not a directory")}
		}
		n = child
	}
	c.loggedLocked("mkdir " + path)
	return nil
}

func (c *memFS) OpenFile(name string, flag int, _ fs.FileMode) (storage.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("open", name); err != nil {
		return nil, err
	}
	dir, base, err := c.parentLocked("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.entries[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case ok && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok && flag&os.O_TRUNC != 0:
		n.data = nil
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{}
		dir.entries[base] = n
	}
	c.loggedLocked("open " + name)
	return &memFile{c: c, n: n, name: name}, nil
}

func (c *memFS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("rename", oldpath); err != nil {
		return err
	}
	odir, obase, err := c.parentLocked("rename", oldpath)
	if err != nil {
		return err
	}
	n, ok := odir.entries[obase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldpath, Err: fs.ErrNotExist}
	}
	ndir, nbase, err := c.parentLocked("rename", newpath)
	if err != nil {
		return err
	}
	delete(odir.entries, obase)
	ndir.entries[nbase] = n
	c.loggedLocked("rename " + oldpath + " -> " + newpath)
	return nil
}

func (c *memFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("remove", name); err != nil {
		return err
	}
	dir, base, err := c.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.entries[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.entries) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.entries, base)
	c.loggedLocked("remove " + name)
	return nil
}

func (c *memFS) RemoveAll(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("removeall", path); err != nil {
		return err
	}
	dir, base, err := c.parentLocked("removeall", path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	delete(dir.entries, base)
	c.loggedLocked("removeall " + path)
	return nil
}

func (c *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("readdir", name); err != nil {
		return nil, err
	}
	n, err := c.lookupLocked("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	var out []fs.DirEntry
	for _, child := range slices.Sorted(maps.Keys(n.entries)) {
		out = append(out, fs.FileInfoToDirEntry(memInfo{name: child, n: n.entries[child]}))
	}
	return out, nil
}

func (c *memFS) ReadFile(name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("readfile", name); err != nil {
		return nil, err
	}
	n, err := c.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return slices.Clone(n.data), nil
}

func (c *memFS) Stat(name string) (fs.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("stat", name); err != nil {
		return nil, err
	}
	n, err := c.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: filepath.Base(name), n: n}, nil
}

func (c *memFS) SyncDir(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callLocked("syncdir", name); err != nil {
		return err
	}
	n, err := c.lookupLocked("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: errors.New("not a directory")}
	}
	if c.drop == nil || !c.drop("syncdir", name) {
		n.syncedEntries = maps.Clone(n.entries)
	}
	c.loggedLocked("syncdir " + name)
	return nil
}

// memFile is a memFS file open for writing; writes append.
type memFile struct {
	c    *memFS
	n    *memNode
	name string
}

func (f *memFile) Write(p []byte) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if err := f.c.callLocked("write", f.name); err != nil {
		return 0, err
	}
	f.n.data = append(f.n.data, p...)
	f.c.loggedLocked("write " + f.name)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if err := f.c.callLocked("sync", f.name); err != nil {
		return err
	}
	if f.c.drop == nil || !f.c.drop("sync", f.name) {
		f.n.synced = slices.Clone(f.n.data)
	}
	f.c.loggedLocked("sync " + f.name)
	return nil
}

func (f *memFile) Close() error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if err := f.c.callLocked("close", f.name); err != nil {
		return err
	}
	f.c.loggedLocked("close " + f.name)
	return nil
}

// memInfo is the fs.FileInfo of a memFS node.
type memInfo struct {
	name string
	n    *memNode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.n.data)) }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
