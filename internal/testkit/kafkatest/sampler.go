package kafkatest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Sampler is a read-committed reader of a Kafka sink's topic that samples it
// while a pipeline runs and dies. Each sample is an atomic snapshot of the
// last stable offsets of every partition (one broker answers one request),
// the records below them by transaction, and the newest complete checkpoint
// as latest reports it after the snapshot (a commit follows its checkpoint's
// completion, so a visible transaction's checkpoint is complete by then).
// Check judges the samples once every transaction is decided.
type Sampler struct {
	cl     *kgo.Client
	topic  string
	latest func() (int64, error)

	pos     map[int32]int64
	counts  map[Txn]int64
	samples []Sample
	err     error
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// Sample is what one snapshot saw: the newest complete checkpoint and the
// records visible per transaction.
type Sample struct {
	Latest int64
	Counts map[Txn]int64
}

// StartSampler samples topic every interval until Stop.
func StartSampler(cl *kgo.Client, topic string, interval time.Duration, latest func() (int64, error)) *Sampler {
	s := &Sampler{cl: cl, topic: topic, latest: latest, pos: map[int32]int64{}, counts: map[Txn]int64{},
		done: make(chan struct{}), stopped: make(chan struct{})}
	go s.loop(interval)
	return s
}

func (s *Sampler) loop(interval time.Duration) {
	defer close(s.stopped)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if err := s.sample(); err != nil {
			s.err = err
			return
		}
	}
}

// sample takes one snapshot and keeps it.
func (s *Sampler) sample() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := EndOffsets(ctx, s.cl, true, s.topic)
	if err != nil {
		return err
	}
	latest, err := s.latest()
	if err != nil {
		return err
	}
	for p, end := range ends[s.topic] {
		if end <= s.pos[p] {
			continue
		}
		rs, err := Fetch(ctx, s.cl, s.topic, p, s.pos[p], end, true)
		if err != nil {
			return err
		}
		for _, r := range rs {
			s.counts[r.Txn()]++
		}
		s.pos[p] = end
	}
	s.samples = append(s.samples, Sample{Latest: latest, Counts: maps.Clone(s.counts)})
	return nil
}

// Stop ends the sampling and returns the samples, or the error that ended
// the sampling early.
func (s *Sampler) Stop() ([]Sample, error) {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
	return s.samples, s.err
}

// Check judges samples against the committed markers: a visible transaction
// without a committed marker, or of a checkpoint not complete when the
// sample was taken, is a problem; so is one visible in part when whole (one
// sink subtask: a checkpoint's output is one transaction). Partly visible
// transactions are counted in partial either way (with several sink
// subtasks, records of a committed transaction can wait behind another
// subtask's open transaction in a partition). Each sample with a problem
// yields one line.
func Check(samples []Sample, markers map[Txn]Marker, whole bool) (problems []string, partial int) {
	for i, smp := range samples {
		var bad []string
		for ref, n := range smp.Counts {
			m, ok := markers[ref]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%d records of producer %d epoch %d are visible but the transaction has no committed marker", n, ref.ProducerID, ref.Epoch))
			case m.Checkpoint > smp.Latest:
				bad = append(bad, fmt.Sprintf("transaction %s of checkpoint %d is visible while the newest complete checkpoint was %d", m.TxnID, m.Checkpoint, smp.Latest))
			case n > m.Records:
				bad = append(bad, fmt.Sprintf("%d records of transaction %s visible, it holds %d", n, m.TxnID, m.Records))
			case n < m.Records:
				partial++
				if whole {
					bad = append(bad, fmt.Sprintf("%d of the %d records of checkpoint %d (transaction %s) are visible: not all at once", n, m.Records, m.Checkpoint, m.TxnID))
				}
			}
		}
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("sample %d: %v", i, bad))
		}
	}
	return problems, partial
}
