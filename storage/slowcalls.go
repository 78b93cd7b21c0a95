package storage

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// SlowCallReporter is implemented by storage that reports calls that hang
// (Local, storage/blob). A job gives it its log when it is created, so that a
// store that stops answering is visible while it hangs, not only once a
// timeout expires: checkpointing.txt asks to monitor checkpoint-storage
// latency.
type SlowCallReporter interface {
	// ReportSlowCalls logs a WARN to log for every call outstanding longer
	// than after (DefaultSlowCall when after <= 0), naming the call and the
	// storage, repeated every SlowCallRepeat while it hangs, and an INFO
	// when such a call returns. A nil log stops the reports.
	ReportSlowCalls(log *slog.Logger, after time.Duration)
}

const (
	// DefaultSlowCall is how long a storage call may be outstanding before
	// it is reported: well above a healthy store's latency, well below the
	// request timeouts (1 min) and checkpoint timeout (10 min) that would
	// end it.
	DefaultSlowCall = 10 * time.Second
	// SlowCallRepeat is the least time between two reports of one call that
	// still hangs.
	SlowCallRepeat = time.Minute
)

// SlowCalls watches the calls of one storage and reports those that hang
// (see SlowCallReporter). The zero value reports nothing until Report is
// called; it is safe for concurrent use.
type SlowCalls struct {
	cfg atomic.Pointer[slowConfig]
}

// slowConfig is where and when SlowCalls reports.
type slowConfig struct {
	log      *slog.Logger
	location string
	after    time.Duration
	repeat   time.Duration
}

// Report sets the log, the storage's location for messages and the
// threshold (DefaultSlowCall when after <= 0). Calls already outstanding keep
// the settings they began with.
func (s *SlowCalls) Report(log *slog.Logger, location string, after time.Duration) {
	if log == nil {
		s.cfg.Store(nil)
		return
	}
	if after <= 0 {
		after = DefaultSlowCall
	}
	s.cfg.Store(&slowConfig{log: log, location: location, after: after, repeat: max(SlowCallRepeat, after)})
}

// Logger returns the log Report set, or nil.
func (s *SlowCalls) Logger() *slog.Logger {
	if c := s.cfg.Load(); c != nil {
		return c.log
	}
	return nil
}

// Begin starts watching one call, described by call ("write metadata of
// checkpoint 7"); the function it returns ends the watch and must be called
// once when the call returns.
func (s *SlowCalls) Begin(call string) (end func()) {
	cfg := s.cfg.Load()
	if cfg == nil {
		return func() {}
	}
	c := &slowCall{cfg: cfg, call: call, start: time.Now()}
	c.mu.Lock()
	c.timer = time.AfterFunc(cfg.after, c.warn)
	c.mu.Unlock()
	return c.end
}

// slowCall is one watched call.
type slowCall struct {
	cfg   *slowConfig // immutable
	call  string      // immutable
	start time.Time   // immutable

	mu     sync.Mutex
	timer  *time.Timer // guarded by mu
	done   bool        // guarded by mu
	warned bool        // guarded by mu
}

// warn reports the call as hanging and schedules the next report.
func (c *slowCall) warn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.warned = true
	c.cfg.log.Warn("storage call has not returned", "call", c.call, "storage", c.cfg.location,
		"elapsed", time.Since(c.start).Round(time.Millisecond))
	c.timer.Reset(c.cfg.repeat)
}

// end stops watching the call and, if it was reported, reports its return.
func (c *slowCall) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	c.timer.Stop()
	if c.warned {
		c.cfg.log.Info("storage call returned", "call", c.call, "storage", c.cfg.location,
			"elapsed", time.Since(c.start).Round(time.Millisecond))
	}
}
