package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/internal/jsonscan"
)

// Message is one Kafka record as the source hands it to the decode function.
// Key, Value and Headers belong to the message: the decode function may keep
// them.
type Message struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	// Timestamp is the record's timestamp (set by the producer, or by the
	// broker with log-append time), millisecond precision.
	Timestamp time.Time
	Headers   []MessageHeader
}

// MessageHeader is a record header: a key and a value.
type MessageHeader = kgo.RecordHeader

// Decoder turns a message into a record value and its event time in Unix
// nanoseconds. An error fails the task with a *DecodeError naming the record.
// It is called from the source subtask's goroutine, one message at a time.
type Decoder[T any] func(Message) (value T, eventTime int64, err error)

// DecodeError is a record the decode function rejected. The source fails the
// task with it (the job restarts from its last checkpoint and meets the same
// record again, so a bad record stops the job until it is dealt with);
// callers tell it from other failures with errors.As.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	// Err is the decode function's error.
	Err error
}

// Error names the record and the cause.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("kafka source: cannot decode the record at topic %s partition %d offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the decode function's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// EventTime extracts a message's event time in Unix nanoseconds.
type EventTime func(Message) (int64, error)

// RecordTimestamp is the EventTime that uses the Kafka record timestamp.
func RecordTimestamp(m Message) (int64, error) { return m.Timestamp.UnixNano(), nil }

// JSONEventTime returns the EventTime read from field of the message's JSON
// object value: an RFC 3339 string ("2026-01-02T15:04:05.123Z") or a number
// of milliseconds since the Unix epoch (fractions allowed). A dotted field
// ("meta.ts") reads a nested object. A missing, null or malformed field is an
// error, which fails the record.
func JSONEventTime(field string) EventTime {
	path := strings.Split(field, ".")
	return func(m Message) (int64, error) {
		raw, err := jsonField(m.Value, path)
		if err != nil {
			return 0, fmt.Errorf("event time field %q: %w", field, err)
		}
		t, err := eventtime.JSON(raw)
		if err != nil {
			return 0, fmt.Errorf("event time field %q: %w", field, err)
		}
		return t, nil
	}
}

// DecodeJSON returns a decoder that unmarshals the message value (JSON) into
// T and takes the event time from eventTime; nil means RecordTimestamp. A
// value that is not valid UTF-8, or has a lone surrogate escape, is an error
// (jsonscan.CheckText): encoding/json would read U+FFFD there and make
// distinct values one.
func DecodeJSON[T any](eventTime EventTime) Decoder[T] {
	if eventTime == nil {
		eventTime = RecordTimestamp
	}
	return func(m Message) (T, int64, error) {
		var v T
		if err := json.Unmarshal(m.Value, &v); err != nil {
			return v, 0, fmt.Errorf("value is not the expected JSON: %w", err)
		}
		if err := jsonscan.CheckText(m.Value); err != nil {
			return v, 0, fmt.Errorf("value is not valid text: %w", err)
		}
		t, err := eventTime(m)
		return v, t, err
	}
}

// jsonField returns the raw JSON of the value at path in the object data.
func jsonField(data []byte, path []string) ([]byte, error) {
	raw := data
	for i, name := range path {
		v, found, err := jsonscan.Member(raw, name)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("value: %w", err)
			}
			return nil, fmt.Errorf("%q: %w", strings.Join(path[:i], "."), err)
		}
		if !found {
			return nil, errors.New("missing")
		}
		raw = v
	}
	return raw, nil
}
