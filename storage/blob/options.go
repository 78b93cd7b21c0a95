package blob

import (
	"fmt"
	"time"
)

// Options configures a Storage. The zero value means the defaults. Each field can also be set
// with a URL parameter of the same (lowercase) name, e.g. s3://bucket/prefix?lease=1m&timeout=30s;
// setting a field both ways to different values is an error.
type Options struct {
	// Timeout bounds each call that moves no state data: writing and reading metadata, listing,
	// deleting, and every request of the lock. A stuck request then fails the call instead of
	// stalling checkpointing (the runtime writes metadata with a context that is never cancelled).
	// State files are bounded by the caller's context only: their size has no limit, and the
	// checkpoint timeout already covers them.
	// The default value is 1 minute.
	Timeout time.Duration
	// Lease is how long the lock taken by Lock stays valid without a renewal. The holder renews it
	// every Lease/3 and stops using the storage (every call fails with storage.ErrLockLapsed) once
	// no renewal succeeded for 3/4 of Lease, until a renewal finds the lock object still its own;
	// another process takes a lock over only after seeing it unchanged for a whole Lease. Longer
	// leases let a job work through longer storage outages without a restart, shorter ones let a
	// restart on another machine take over sooner after a crash. (Kubernetes leader election,
	// which Flink's HA uses, defaults to a 15 s lease.)
	// The default value is 30 seconds.
	Lease time.Duration
}

// Default values of Options.
const (
	DefaultTimeout = time.Minute
	DefaultLease   = 30 * time.Second
)

// merge returns o with the URL's parameters and then the defaults filled in.
func (o Options) merge(loc *location) (Options, error) {
	for _, f := range []struct {
		name     string
		field    *time.Duration
		fromURL  time.Duration
		fallback time.Duration
	}{
		{paramTimeout, &o.Timeout, loc.timeout, DefaultTimeout},
		{paramLease, &o.Lease, loc.lease, DefaultLease},
	} {
		switch {
		case *f.field < 0:
			return o, fmt.Errorf("storage/blob: option %s %v must not be negative", f.name, *f.field)
		case *f.field != 0 && f.fromURL != 0 && *f.field != f.fromURL:
			return o, fmt.Errorf("storage/blob: %s is %v in the options and %v in the URL %s: set it once", f.name, *f.field, f.fromURL, loc.base)
		case *f.field == 0 && f.fromURL != 0:
			*f.field = f.fromURL
		case *f.field == 0:
			*f.field = f.fallback
		}
	}
	return o, nil
}
