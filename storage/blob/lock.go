package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// An object store has no flock, and a process that dies holds nothing the store could release.
// The lock here is a lease (as in Chubby, or Kubernetes leader election, which Flink's HA uses):
//
//   - Acquire: create <prefix>.lease (LeaseName) with IfNotExist, holding a random owner token.
//     Only one of several concurrent creators succeeds.
//   - Hold: rewrite the object every Lease/3 with an increasing sequence number, after checking it
//     still names this owner at a sequence number this holder wrote. A failed renewal is retried
//     every Lease/12.
//   - Lapse: a holder that has not renewed for 3/4 of Lease (the store did not answer) refuses
//     every call with storage.ErrLockLapsed, so it can complete no checkpoint and delete nothing
//     while another process may be taking over, and a restart of its job fails at its first List,
//     before the recovery abandons staged sink output. It keeps trying to renew: a renewal that
//     finds the object unchanged by anyone else (this owner token, a sequence number this holder
//     wrote) rewrites it, and the lock is held again: an outage of the store longer than the lease
//     costs the job a restart, not its lock.
//   - Lose: a holder that finds the object deleted, overwritten or naming another owner has lost
//     the lock for good (fencing): every later call fails with storage.ErrLocked, and the job
//     stops.
//   - Take over: a lock object is stale when it stays unchanged for a whole Lease, watched by the
//     process that wants it (no clocks are compared, so clock skew between machines does not
//     matter), or at once when it names a process of the same PID namespace on the same boot that
//     no longer exists (a crash or kill -9 on this machine), or this process under an owner token
//     it no longer holds (a release whose delete failed). The taker deletes it and creates its own.
//   - Release: stop renewing and delete the object if it still names this owner.
//
// Limits, as for any lease without fencing tokens checked by the store itself: mutual exclusion
// assumes that a request is not delayed in the network by more than Lease/4 and that the clocks of
// both machines run at about the same rate. Within them, two writers never both hold a valid lock.
// Beyond them, the metadata's conditional create still keeps two writers from both completing the
// same checkpoint id, and the handle checks of ReadFile detect a state file one of them replaced.

// LeaseName is the lock object under the prefix. It differs from storage.LockName, the flock file
// of a Local directory, which is left behind empty when its process ends: a file:// URL on a
// directory Local used before must not find it and wait out a lease before taking it over.
const LeaseName = ".lease"

// liveOwners holds the owner tokens of the locks this process holds and has not lost, so that a
// lock object naming this process can be told apart from one it left behind.
var liveOwners sync.Map // owner token → struct{}

// lockRecord is the content of the lock object, JSON with the checksum trailer. Host, PID and the
// times are for people looking at the object and for the same-machine shortcut; liveness is judged
// by change, not by comparing these times with a local clock.
type lockRecord struct {
	// Owner is a random token naming one acquisition.
	Owner string `json:"owner"`
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	// Namespace identifies the PID namespace and boot of the holder (Linux); PIDs can be compared
	// only within one. Empty when unknown.
	Namespace string    `json:"namespace,omitempty"`
	Acquired  time.Time `json:"acquired"`
	Renewed   time.Time `json:"renewed"`
	// Lease is the holder's lease, for the taker's information.
	Lease string `json:"lease"`
	// Seq counts renewals, so that every renewal changes the object.
	Seq int64 `json:"seq"`
}

// lease is a lock held by this process.
type lease struct {
	s     *Storage   // immutable
	key   string     // immutable
	owner string     // immutable; rec.Owner
	rec   lockRecord // owned by the renewing goroutine once it runs
	stop  chan struct{}
	done  chan struct{}

	// confirmed is the sequence number of the last renewal known to have landed; rec.Seq is the
	// last one attempted. The object names this holder at a sequence number in between if nobody
	// else wrote it. Owned by the renewing goroutine.
	confirmed int64

	mu sync.Mutex
	// renewed is when the last successful write of the lock object started (monotonic clock).
	renewed time.Time // guarded by mu
	// lapsed is non-nil while the lock is lapsed: not renewed for 3/4 of Lease. It wraps
	// storage.ErrLockLapsed; a successful renewal clears it.
	lapsed error // guarded by mu
	// lost is non-nil once the lock is lost; it never becomes nil again.
	// INVARIANT: lost != nil implies nothing clears it and no renewal runs any more.
	lost error // guarded by mu
}

// lockAttempts bounds the create attempts of one Lock: each failed one means the object was
// deleted or found stale between two requests, which repeats only under contention.
const lockAttempts = 5

// Lock claims the storage for this process until release is called (see the lease protocol
// above). It fails with an error wrapping storage.ErrLocked when another live process holds it.
//
// Lock does not return at once when the lock object exists: it watches the object for up to one
// Lease to tell a live holder (the object changes within Lease/3) from a dead one (it does not).
// A holder in the same PID namespace is judged at once. Once ctx is done Lock returns promptly with
// an error wrapping ctx.Err(), holding nothing; the release function it returns on success does not
// depend on ctx, and neither does the renewal of the lock.
func (s *Storage) Lock(ctx context.Context) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/blob: lock %s: %w", s.loc.base, err)
	}
	s.mu.Lock()
	busy := s.held != nil
	s.mu.Unlock()
	if busy {
		return nil, fmt.Errorf("%w: %s is already locked by this process", storage.ErrLocked, s.loc.base)
	}
	host, _ := os.Hostname()
	t := time.Now()
	rec := lockRecord{Owner: rand.Text(), Host: host, PID: os.Getpid(), Namespace: processNamespace(),
		Acquired: t.UTC(), Renewed: t.UTC(), Lease: s.opts.Lease.String()}
	key := s.loc.prefix + LeaseName

	for range lockAttempts {
		start := time.Now()
		err := s.putLock(ctx, key, rec, true)
		if err == nil {
			return s.hold(key, rec, start), nil
		}
		if ctx.Err() != nil {
			return nil, s.cancelled(ctx, key, rec.Owner)
		}
		cur, raw, rerr := s.readLock(ctx, key)
		if rerr == nil && cur.Owner == rec.Owner {
			return s.hold(key, rec, start), nil // the create landed; its answer was lost
		}
		if ctx.Err() != nil {
			return nil, s.cancelled(ctx, key, rec.Owner)
		}
		if !errors.Is(err, errExists) {
			return nil, s.fail(err, "lock %s", s.where(key))
		}
		switch {
		case errors.Is(rerr, storage.ErrNotFound):
			continue // released meanwhile
		case rerr != nil && !storage.IsCorrupt(rerr):
			return nil, fmt.Errorf("storage/blob: lock %s: %w", s.where(key), rerr)
		}
		if err := s.judge(ctx, key, cur, raw, rerr); err != nil {
			if ctx.Err() != nil {
				return nil, s.cancelled(ctx, key, rec.Owner)
			}
			return nil, err
		}
		// Stale and deleted: try again.
	}
	return nil, fmt.Errorf("%w: %s: the lock object changed hands %d times while acquiring it", storage.ErrLocked, s.where(key), lockAttempts)
}

// judge decides about a lock object held by someone else: it returns nil after deleting a stale
// one, an error wrapping storage.ErrLocked for a live holder, or another error. readErr is the
// corruption error when the object does not decode (then cur is zero and only watching helps).
// Watching stops when ctx is done.
func (s *Storage) judge(ctx context.Context, key string, cur lockRecord, raw []byte, readErr error) error {
	held := func(why string) error {
		if readErr != nil {
			return fmt.Errorf("%w: %s exists and %s (it does not decode: %v); delete it if no job uses %s",
				storage.ErrLocked, s.where(key), why, readErr, s.loc.base)
		}
		return fmt.Errorf("%w: %s is locked by host %s pid %d since %s (%s): another process runs a pipeline on these checkpoints",
			storage.ErrLocked, s.loc.base, cur.Host, cur.PID, cur.Acquired.Format(time.RFC3339), why)
	}
	if readErr == nil && cur.Namespace != "" && cur.Namespace == processNamespace() {
		if cur.PID == os.Getpid() {
			if _, live := liveOwners.Load(cur.Owner); live {
				return held("this process holds it")
			}
			return s.deleteIfUnchanged(ctx, key, raw) // left behind by a lock of this process that ended
		}
		if !processAlive(cur.PID) {
			return s.deleteIfUnchanged(ctx, key, raw)
		}
	}
	// Watch the object for one lease: a live holder rewrites it every Lease/3.
	poll := time.NewTicker(max(s.opts.Lease/6, time.Millisecond))
	defer poll.Stop()
	deadline := time.Now().Add(s.opts.Lease)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("storage/blob: lock %s: watching whether its holder is alive: %w", s.where(key), ctx.Err())
		case <-poll.C:
		}
		now, err := s.readRaw(ctx, key)
		switch {
		case isNotExist(err):
			return nil // released
		case err != nil:
			return s.fail(err, "lock %s", s.where(key))
		case !bytes.Equal(now, raw):
			return held("it was renewed just now")
		}
	}
	return s.deleteIfUnchanged(ctx, key, raw)
}

// deleteIfUnchanged deletes a stale lock object unless it changed since it was judged stale. The
// read and the delete are two requests (S3 has no conditional delete); see the limits in
// the protocol comment.
func (s *Storage) deleteIfUnchanged(ctx context.Context, key string, raw []byte) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	now, err := s.bucket.get(ctx, key)
	switch {
	case isNotExist(err):
		return nil
	case err != nil:
		return s.fail(err, "lock %s: take over a stale lock", s.where(key))
	case !bytes.Equal(now, raw):
		return fmt.Errorf("%w: %s changed while being taken over: its holder is alive", storage.ErrLocked, s.where(key))
	}
	if err := s.bucket.del(ctx, key); err != nil {
		return s.fail(err, "lock %s: delete a stale lock", s.where(key))
	}
	return nil
}

// hold records the acquired lock, starts renewing it and returns its release function.
func (s *Storage) hold(key string, rec lockRecord, acquired time.Time) func() error {
	l := &lease{s: s, key: key, owner: rec.Owner, rec: rec, renewed: acquired, stop: make(chan struct{}), done: make(chan struct{})}
	liveOwners.Store(rec.Owner, struct{}{})
	s.mu.Lock()
	s.held = l
	s.mu.Unlock()
	go l.run()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = l.release() })
		return err
	}
}

// valid returns nil while the lock is held and fresh, an error wrapping storage.ErrLockLapsed
// while it is lapsed, and one wrapping storage.ErrLocked once it is lost.
func (l *lease) valid() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if age := time.Since(l.renewed); age >= l.s.opts.Lease*3/4 && l.lapsed == nil {
		l.lapsed = fmt.Errorf("%w: the lock on %s was not renewed for %v (lease %v): the store did not answer; "+
			"no call may use it until a renewal finds that no other process took over",
			storage.ErrLockLapsed, l.s.loc.base, age.Round(time.Millisecond), l.s.opts.Lease)
		if log := l.s.slow.Logger(); log != nil {
			log.Warn("checkpoint storage lock lapsed: every storage call fails until it is renewed", "storage", l.s.loc.base,
				"not_renewed_for", age.Round(time.Millisecond), "lease", l.s.opts.Lease)
		}
	}
	return l.lapsed
}

// loseLocked records that the lock is lost, for good. l.mu must be held.
func (l *lease) loseLocked(err error) {
	if l.lost == nil {
		l.lost = err
		liveOwners.Delete(l.owner)
	}
}

// run renews the lock every Lease/3, and every Lease/12 after a failed renewal, until release or
// until it is lost. A lapsed lock is renewed like a fresh one: renew checks that nobody else wrote
// the object.
func (l *lease) run() {
	defer close(l.done)
	period, retry := l.s.opts.Lease/3, max(l.s.opts.Lease/12, time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if errors.Is(l.valid(), storage.ErrLocked) {
			return
		}
		start := time.Now()
		err := l.renew()
		switch {
		case errors.Is(err, storage.ErrLocked):
			l.mu.Lock()
			l.loseLocked(err)
			l.mu.Unlock()
			if log := l.s.slow.Logger(); log != nil {
				log.Error("checkpoint storage lock lost: another process holds it now", "storage", l.s.loc.base, "err", err)
			}
			return
		case err == nil:
			l.mu.Lock()
			l.renewed = start
			lapsed := l.lapsed
			l.lapsed = nil
			l.mu.Unlock()
			if log := l.s.slow.Logger(); lapsed != nil && log != nil {
				log.Info("checkpoint storage lock renewed after it lapsed: no other process took over", "storage", l.s.loc.base)
			}
			t.Reset(period)
		default:
			// The store did not answer: retry soon; valid refuses calls once the lease runs out.
			t.Reset(retry)
		}
	}
}

// renew rewrites the lock object after checking it still names this owner. It does not depend on
// the context of the Lock that acquired it: the lock lives until released.
func (l *lease) renew() error {
	ctx := context.Background()
	cur, _, err := l.s.readLock(ctx, l.key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("%w: the lock object %s was deleted by another process", storage.ErrLocked, l.s.where(l.key))
	case storage.IsCorrupt(err):
		return fmt.Errorf("%w: the lock object %s was overwritten: %v", storage.ErrLocked, l.s.where(l.key), err)
	case err != nil:
		return err
	case cur.Owner != l.owner:
		return fmt.Errorf("%w: the lock on %s was taken over by host %s pid %d", storage.ErrLocked, l.s.loc.base, cur.Host, cur.PID)
	case cur.Seq < l.confirmed || cur.Seq > l.rec.Seq:
		return fmt.Errorf("%w: the lock object %s was overwritten: it names this holder at renewal %d, which it did not write (wrote %d..%d)",
			storage.ErrLocked, l.s.where(l.key), cur.Seq, l.confirmed, l.rec.Seq)
	}
	l.rec.Seq++
	l.rec.Renewed = time.Now().UTC()
	if err := l.s.putLock(ctx, l.key, l.rec, false); err != nil {
		return err
	}
	l.confirmed = l.rec.Seq
	return nil
}

// release stops renewing and deletes the lock object if it still names this owner.
func (l *lease) release() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	l.loseLocked(fmt.Errorf("%w: the lock on %s was released", storage.ErrLocked, l.s.loc.base))
	l.mu.Unlock()
	s := l.s
	s.mu.Lock()
	if s.held == l {
		s.held = nil
	}
	s.mu.Unlock()
	return s.deleteOwn(l.key, l.owner)
}

// deleteOwn deletes the lock object if it names owner; it is not an error when it does not exist
// or names another owner (taken over: not ours to delete).
func (s *Storage) deleteOwn(key, owner string) error {
	ctx := context.Background()
	cur, _, err := s.readLock(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound), storage.IsCorrupt(err):
		return nil
	case err != nil:
		return err
	case cur.Owner != owner:
		return nil
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if err := s.bucket.del(ctx, key); err != nil {
		return s.fail(err, "unlock %s", s.where(key))
	}
	return nil
}

// cancelled is Lock's error once ctx is done. A create of the lock object whose answer was lost
// (ctx interrupted it, or the network) may still have landed: the object is deleted if it names
// owner, Lock's token, so that a Lock that failed does not leave the location locked (others would
// wait out a lease). That is one more request, bounded like every request of the lock.
func (s *Storage) cancelled(ctx context.Context, key, owner string) error {
	err := fmt.Errorf("storage/blob: lock %s: %w", s.where(key), ctx.Err())
	if derr := s.deleteOwn(key, owner); derr != nil {
		return fmt.Errorf("%w (and removing a lock object it may have created failed: %v)", err, derr)
	}
	return err
}

// lockTimeout bounds one request of the lock: ctx, Options.Timeout, but no more than Lease/3, the
// renewal period.
func (s *Storage) lockTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, min(s.opts.Timeout, s.opts.Lease/3))
}

// putLock writes rec to the lock object.
func (s *Storage) putLock(ctx context.Context, key string, rec lockRecord, ifNotExist bool) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := s.lockTimeout(ctx)
	defer cancel()
	return s.put(ctx, key, data, ifNotExist)
}

// readRaw returns the stored bytes of key.
func (s *Storage) readRaw(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.lockTimeout(ctx)
	defer cancel()
	return s.bucket.get(ctx, key)
}

// readLock reads and decodes the lock object, returning its stored bytes too. A missing object
// wraps storage.ErrNotFound; one that does not decode is corrupt.
func (s *Storage) readLock(ctx context.Context, key string) (lockRecord, []byte, error) {
	raw, err := s.readRaw(ctx, key)
	if isNotExist(err) {
		return lockRecord{}, nil, s.notFound(key)
	}
	if err != nil {
		return lockRecord{}, nil, s.fail(err, "read %s", s.where(key))
	}
	payload, err := storage.Decode(s.where(key), raw)
	if err != nil {
		return lockRecord{}, raw, err
	}
	var rec lockRecord
	if err := json.Unmarshal(payload, &rec); err != nil || rec.Owner == "" {
		return lockRecord{}, raw, &storage.CorruptError{Path: s.where(key), Reason: fmt.Sprintf("not a lock record: %v", err)}
	}
	return rec, raw, nil
}
