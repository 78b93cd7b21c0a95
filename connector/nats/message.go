package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/internal/jsonscan"
)

// Message is one stream message as the decode function sees it.
type Message struct {
	// Stream is the stream's name.
	Stream string
	// Subject is the subject the message was published to.
	Subject string
	// Sequence is the message's stream sequence.
	Sequence uint64
	// Timestamp is when the server stored the message.
	Timestamp time.Time
	// Header holds the message headers, nil when there are none.
	Header natsgo.Header
	// Data is the payload. It belongs to the message: decode may keep it.
	Data []byte
}

// Timestamp returns the message's JetStream store time in Unix nanoseconds:
// the event time when the payload carries none (processing time of the
// publisher, in effect).
func Timestamp(m Message) int64 { return m.Timestamp.UnixNano() }

// JSON decodes the payload into T with encoding/json; the event time is the
// JetStream store time (Timestamp). A payload that is not valid UTF-8, or
// has a lone surrogate escape, is an error (jsonscan.CheckText):
// encoding/json would read U+FFFD there and make distinct values one.
func JSON[T any](m Message) (T, int64, error) {
	var v T
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return v, 0, err
	}
	if err := jsonscan.CheckText(m.Data); err != nil {
		return v, 0, fmt.Errorf("the payload is not valid text: %w", err)
	}
	return v, Timestamp(m), nil
}

// JSONWithTime returns a decode function that decodes the payload into T
// with encoding/json and takes the event time from the payload's top-level
// field: an RFC 3339 string or a number of milliseconds since the Unix epoch
// (see eventtime.JSON). A missing or malformed field is an error, as is invalid
// text (see JSON).
func JSONWithTime[T any](field string) func(Message) (T, int64, error) {
	return func(m Message) (T, int64, error) {
		var v T
		if err := json.Unmarshal(m.Data, &v); err != nil {
			return v, 0, err
		}
		if err := jsonscan.CheckText(m.Data); err != nil {
			return v, 0, fmt.Errorf("the payload is not valid text: %w", err)
		}
		ts, err := FieldTime(m.Data, field)
		return v, ts, err
	}
}

// FieldTime returns the event time in the top-level field of the JSON object
// data, parsed by eventtime.JSON.
func FieldTime(data []byte, field string) (int64, error) {
	raw, err := topLevelField(data, field)
	if err != nil {
		return 0, err
	}
	ts, err := eventtime.JSON(raw)
	if err != nil {
		return 0, fmt.Errorf("field %q: %w", field, err)
	}
	return ts, nil
}

// topLevelField returns the raw value of field in the JSON object data (the
// last one when it repeats, as encoding/json), scanning without decoding;
// the scan checks the whole payload as encoding/json would.
func topLevelField(data []byte, field string) ([]byte, error) {
	raw, found, err := jsonscan.Member(data, field)
	var syntax *jsonscan.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return nil, fmt.Errorf("looking for field %q: the payload is not valid JSON: %w", field, err)
	case err != nil:
		return nil, fmt.Errorf("looking for field %q: the payload is %w", field, err)
	case !found:
		return nil, fmt.Errorf("field %q is missing", field)
	}
	return raw, nil
}
