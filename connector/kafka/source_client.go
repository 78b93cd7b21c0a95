package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// srcFetchMaxWait is how long a broker may hold a fetch that found nothing.
// Partitions assigned while a fetch is held join the next fetch, so this
// bounds how late a discovered partition starts.
const srcFetchMaxWait = 500 * time.Millisecond

// srcMetadataMinAge is the least time between two metadata refreshes of a
// source client (franz-go's default is 5s). A partition found by discovery
// needs a refresh before it is fetched, so this bounds how late it starts.
const srcMetadataMinAge = time.Second

// sourceClientOpts returns the franz-go options of a source subtask's
// client: no consumer group (partitions are assigned with exact offsets),
// the configured isolation, control records kept (their offsets advance the
// position, see srcSubtask.Read), and no silent offset reset: an offset that
// is no longer in the log fails the task instead of skipping records.
func sourceClientOpts(cfg *SourceConfig, log *slog.Logger) []kgo.Opt {
	iso := kgo.ReadCommitted()
	if cfg.ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("ingest-kafka-source"),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(srcFetchMaxWait),
		kgo.MetadataMinAge(srcMetadataMinAge),
		kgo.WithLogger(srcKgoLogger{log}),
	}
	return append(opts, cfg.ClientOptions...)
}

// srcOffsetKind is which offsets of a partition to list.
type srcOffsetKind int

const (
	// srcLogStart is the first offset still in the log.
	srcLogStart srcOffsetKind = iota
	// srcLogEnd is the high watermark: one past the last record.
	srcLogEnd
	// srcStableEnd is the last stable offset: the end of what a
	// read-committed consumer can read now.
	srcStableEnd
)

func (k srcOffsetKind) String() string {
	switch k {
	case srcLogStart:
		return "log start offsets"
	case srcLogEnd:
		return "end offsets"
	}
	return "last stable offsets"
}

// srcEndKind returns the end offsets matching the configured isolation.
func srcEndKind(cfg *SourceConfig) srcOffsetKind {
	if cfg.ReadUncommitted {
		return srcLogEnd
	}
	return srcStableEnd
}

// srcListOffsets returns every partition of topic with its offset of kind.
// A missing topic, or any partition whose offset could not be listed, is an
// error: the caller needs all of them.
func srcListOffsets(ctx context.Context, adm *kadm.Client, topic string, kind srcOffsetKind) (map[int32]int64, error) {
	var listed kadm.ListedOffsets
	var err error
	switch kind {
	case srcLogStart:
		listed, err = adm.ListStartOffsets(ctx, topic)
	case srcLogEnd:
		listed, err = adm.ListEndOffsets(ctx, topic)
	default:
		listed, err = adm.ListCommittedOffsets(ctx, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the %s of topic %s: %w", kind, topic, err)
	}
	parts, ok := listed[topic]
	if !ok || len(parts) == 0 {
		return nil, fmt.Errorf("topic %s does not exist or has no partitions", topic)
	}
	out := make(map[int32]int64, len(parts))
	for p, o := range parts {
		if o.Err != nil {
			if p == -1 && errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("topic %s does not exist: %w", topic, o.Err)
			}
			return nil, fmt.Errorf("listing the %s of topic %s partition %d: %w", kind, topic, p, o.Err)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// srcKgoLogger passes franz-go's warnings and errors to the subtask's log.
type srcKgoLogger struct{ l *slog.Logger }

// Level asks franz-go for warnings and errors only.
func (srcKgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log forwards one franz-go log line.
func (g srcKgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	g.l.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
