package storagetest

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// FSOp names a filesystem call a storage.Local makes, for fault injection with FaultFS.
type FSOp int

// The filesystem calls of a storage.Local. FSWrite, FSSync and FSClose act on an open file.
const (
	FSMkdir FSOp = iota + 1
	FSOpen
	FSWrite
	FSSync
	FSClose
	FSRename
	FSRemove
	FSRemoveAll
	FSReadDir
	FSReadFile
	FSStat
	FSSyncDir
)

// String returns the call's name as the error of a failed call shows it.
func (o FSOp) String() string {
	switch o {
	case FSMkdir:
		return "mkdir"
	case FSOpen:
		return "open"
	case FSWrite:
		return "write"
	case FSSync:
		return "sync"
	case FSClose:
		return "close"
	case FSRename:
		return "rename"
	case FSRemove:
		return "remove"
	case FSRemoveAll:
		return "removeall"
	case FSReadDir:
		return "readdir"
	case FSReadFile:
		return "readfile"
	case FSStat:
		return "stat"
	case FSSyncDir:
		return "syncdir"
	}
	return fmt.Sprintf("FSOp(%d)", int(o))
}

// ErrCrashed is what every call of a FaultFS returns once it crashed: the process that made the
// call is dead, so no call of it may act or succeed any more.
var ErrCrashed = errors.New("storage: simulated crash: the process using this filesystem is dead")

// FaultFS is a filesystem for a storage.Local that fails, slows down or crashes chosen calls, for tests of
// the code that uses storage (after Pebble's vfs/errorfs). Unlike Faulty, which fails whole storage.Storage
// methods, it acts on the calls inside them: a state file's write or fsync, the metadata's rename,
// the directory fsync that makes it durable, the directory listing of a recovery.
//
// It wraps a CrashFS or the operating system's filesystem. On a CrashFS a crash (Crash, CrashWhen)
// keeps only what was synced, as a power loss would, and Survivor returns that filesystem for a
// restarted process. It is safe for concurrent use.
//
// A failed call returns a *fs.PathError wrapping the injected error, as the operating system does,
// and does not reach the wrapped filesystem (except a write that runs out of space part-way).
type FaultFS struct {
	inner storage.FS   // immutable
	base  *CrashFS     // immutable; nil on the operating system's filesystem
	world sync.RWMutex // read-held by every call while it acts, write-held by a crash

	mu   sync.Mutex
	next errQueue[FSOp]                   // guarded by mu; armed by FailNext, oldest first
	when func(op FSOp, path string) error // guarded by mu; set by FailWhen
	// space is how many more bytes writes that spaceMatch accepts may store; negative: unlimited.
	space      int64                  // guarded by mu
	spaceMatch func(path string) bool // guarded by mu
	slow       time.Duration          // guarded by mu; sleep before each write that slowMatch accepts
	slowMatch  func(path string) bool // guarded by mu
	// heal is closed by Heal to wake writes sleeping in a slow write; then replaced.
	heal      chan struct{}                   // guarded by mu
	crashWhen func(op FSOp, path string) bool // guarded by mu
	// crashed is closed by the crash. INVARIANT: closed iff dead is set.
	crashed  chan struct{} // immutable
	dead     bool          // guarded by mu
	survivor *CrashFS      // guarded by mu; set by the crash on a CrashFS
}

// NewFaultFS returns a filesystem that injects nothing until told to, over base, or over the
// operating system's filesystem when base is nil.
func NewFaultFS(base *CrashFS) *FaultFS {
	f := &FaultFS{base: base, inner: storage.OSFS(), next: errQueue[FSOp]{}, space: -1,
		heal: make(chan struct{}), crashed: make(chan struct{})}
	if base != nil {
		f.inner = base.m
	}
	return f
}

// NewLocal returns a storage.Local storing checkpoints in directory dir of f.
func (f *FaultFS) NewLocal(dir string) (*storage.Local, error) {
	return storage.NewLocalFS(dir, faultFS{f})
}

// FailNext makes the next call of op fail with err. Calls queue: FailNext twice fails the next two
// calls. They take precedence over FailWhen.
func (f *FaultFS) FailNext(op FSOp, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next.push(op, err)
}

// FailWhen makes every call consult fn, replacing any earlier fn; nil removes it. fn gets the call
// and its path (for FSRename the old path); a non-nil result fails the call with it. fn may be
// called concurrently and may call any method of f.
func (f *FaultFS) FailWhen(fn func(op FSOp, path string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.when = fn
}

// NoSpaceAfter makes the device full once n more bytes have been written to the files match
// accepts (nil: every storage.File): the write that crosses the limit stores what fits and fails, and every
// later one fails, with an error wrapping syscall.ENOSPC, as a full disk does. A negative n frees
// the device. match may be called concurrently and may call any method of f.
func (f *FaultFS) NoSpaceAfter(n int64, match func(path string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.space, f.spaceMatch = max(n, -1), match
}

// SlowWrites makes every write to a storage.File match accepts (nil: every storage.File) sleep d before it acts;
// zero turns it off. Heal wakes writes that are sleeping. match may be called concurrently and may
// call any method of f.
func (f *FaultFS) SlowWrites(d time.Duration, match func(path string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow, f.slowMatch = d, match
}

// CrashWhen makes f crash just before the first call for which fn returns true: that call and
// every later one fail with ErrCrashed (see Crash). nil removes fn. fn may be called concurrently
// and may call any method of f.
func (f *FaultFS) CrashWhen(fn func(op FSOp, path string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashWhen = fn
}

// Crash simulates a crash of the process using f, now. It waits for the calls in progress to end,
// so that none of them acts or succeeds after the crash, takes what survives, and from then on
// every call fails with ErrCrashed. On a CrashFS it returns the surviving filesystem (only what was
// synced, see CrashFS.Crash); on the operating system's filesystem, where the kernel keeps what was
// written, it returns nil and the directory itself is what survives (a process kill, not a power
// loss). Crashing twice returns the first survivor.
func (f *FaultFS) Crash() *CrashFS {
	f.world.Lock()
	defer f.world.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return f.survivor
	}
	f.dead = true
	if f.base != nil {
		f.survivor = f.base.Crash()
	}
	close(f.crashed)
	return f.survivor
}

// Crashed returns a channel that is closed once f crashed.
func (f *FaultFS) Crashed() <-chan struct{} { return f.crashed }

// Survivor returns what survived f's crash: nil before the crash or on the operating system's
// filesystem.
func (f *FaultFS) Survivor() *CrashFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.survivor
}

// Heal removes every injected fault (FailNext, FailWhen, NoSpaceAfter, SlowWrites, CrashWhen) and
// wakes sleeping slow writes. A crash that happened stays.
func (f *FaultFS) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.next)
	f.when, f.crashWhen = nil, nil
	f.space, f.spaceMatch = -1, nil
	f.slow, f.slowMatch = 0, nil
	close(f.heal)
	f.heal = make(chan struct{})
}

// PathCheckpoint returns the id of the checkpoint whose directory holds path (or is path), as
// storage.Local lays checkpoints out, for the matching functions of FaultFS and Faulty's users.
func PathCheckpoint(path string) (int64, bool) {
	for p := filepath.Clean(path); ; {
		if id, ok := storage.ParseCheckpointDirName(filepath.Base(p)); ok {
			return id, true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return 0, false
		}
		p = parent
	}
}

// fault decides the fate of a call before it acts: ErrCrashed after a crash, a crash when
// CrashWhen says so, else an injected error or nil. The callbacks run without f.mu held, so that
// they may call f's methods.
func (f *FaultFS) fault(op FSOp, path string) error {
	f.mu.Lock()
	if f.dead {
		f.mu.Unlock()
		return ErrCrashed
	}
	crash := f.crashWhen
	f.mu.Unlock()
	if crash != nil && crash(op, path) {
		f.Crash()
		return ErrCrashed
	}
	f.mu.Lock()
	if err, ok := f.next.pop(op); ok {
		f.mu.Unlock()
		return err
	}
	fn := f.when
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, path)
}

// do runs one call: it injects the fault for it or lets act act, unless a crash happened meanwhile.
// act runs while no crash can happen, so it is either fully before a crash or not at all.
func (f *FaultFS) do(op FSOp, path string, act func() error) error {
	if err := f.fault(op, path); err != nil {
		return &fs.PathError{Op: op.String(), Path: path, Err: err}
	}
	f.world.RLock()
	defer f.world.RUnlock()
	if f.isDead() {
		return &fs.PathError{Op: op.String(), Path: path, Err: ErrCrashed}
	}
	return act()
}

func (f *FaultFS) isDead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// faultFS is the storage.FS of a storage.Local on a FaultFS. It is a separate type so that FaultFS exports only
// its controls.
type faultFS struct{ f *FaultFS }

// The methods below implement storage.FS through do.

func (a faultFS) MkdirAll(path string, perm fs.FileMode) error {
	f := a.f
	return f.do(FSMkdir, path, func() error { return f.inner.MkdirAll(path, perm) })
}

func (a faultFS) OpenFile(name string, flag int, perm fs.FileMode) (storage.File, error) {
	f := a.f
	var in storage.File
	err := f.do(FSOpen, name, func() (err error) {
		in, err = f.inner.OpenFile(name, flag, perm)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &faultFile{f: f, in: in, name: name}, nil
}

func (a faultFS) Rename(oldpath, newpath string) error {
	f := a.f
	return f.do(FSRename, oldpath, func() error { return f.inner.Rename(oldpath, newpath) })
}

func (a faultFS) Remove(name string) error {
	f := a.f
	return f.do(FSRemove, name, func() error { return f.inner.Remove(name) })
}

func (a faultFS) RemoveAll(path string) error {
	f := a.f
	return f.do(FSRemoveAll, path, func() error { return f.inner.RemoveAll(path) })
}

func (a faultFS) ReadDir(name string) (des []fs.DirEntry, err error) {
	f := a.f
	err = f.do(FSReadDir, name, func() (err error) {
		des, err = f.inner.ReadDir(name)
		return err
	})
	return des, err
}

func (a faultFS) ReadFile(name string) (b []byte, err error) {
	f := a.f
	err = f.do(FSReadFile, name, func() (err error) {
		b, err = f.inner.ReadFile(name)
		return err
	})
	return b, err
}

func (a faultFS) Stat(name string) (info fs.FileInfo, err error) {
	f := a.f
	err = f.do(FSStat, name, func() (err error) {
		info, err = f.inner.Stat(name)
		return err
	})
	return info, err
}

func (a faultFS) SyncDir(name string) error {
	f := a.f
	return f.do(FSSyncDir, name, func() error { return f.inner.SyncDir(name) })
}

// sleepSlow sleeps before a write to path when SlowWrites says so, or until Heal.
func (f *FaultFS) sleepSlow(path string) {
	f.mu.Lock()
	d, match, heal := f.slow, f.slowMatch, f.heal
	f.mu.Unlock()
	if d <= 0 || (match != nil && !match(path)) {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-heal:
	}
}

// spaceLimited reports whether a write to path counts against NoSpaceAfter's limit. It calls the
// match function, so it runs outside every lock.
func (f *FaultFS) spaceLimited(path string) bool {
	f.mu.Lock()
	space, match := f.space, f.spaceMatch
	f.mu.Unlock()
	return space >= 0 && (match == nil || match(path))
}

// take returns how many of n bytes a write may store before the device is full, and counts them.
func (f *FaultFS) take(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.space < 0 { // freed meanwhile
		return n
	}
	k := int(min(int64(n), f.space))
	f.space -= int64(k)
	return k
}

// faultFile is a storage.File of a FaultFS open for writing.
type faultFile struct {
	f    *FaultFS
	in   storage.File
	name string
}

func (w *faultFile) Write(p []byte) (int, error) {
	w.f.sleepSlow(w.name)
	limited := w.f.spaceLimited(w.name)
	var n int
	err := w.f.do(FSWrite, w.name, func() error {
		k := len(p)
		if limited {
			k = w.f.take(len(p))
		}
		var err error
		n, err = w.in.Write(p[:k])
		if err == nil && k < len(p) {
			err = &fs.PathError{Op: "write", Path: w.name, Err: syscall.ENOSPC}
		}
		return err
	})
	return n, err
}

func (w *faultFile) Sync() error {
	return w.f.do(FSSync, w.name, w.in.Sync)
}

func (w *faultFile) Close() error {
	closed := false
	err := w.f.do(FSClose, w.name, func() error { closed = true; return w.in.Close() })
	if !closed {
		// The kernel releases a storage.File whose close failed, and the files of a dead process.
		_ = w.in.Close()
	}
	return err
}
