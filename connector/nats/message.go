package nats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ingest-engine/ingest/internal/jsonscan"
	"math"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
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
// (see ParseTime). A missing or malformed field is an error, as is invalid
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
		ts, err := fieldTime(m.Data, field, true)
		return v, ts, err
	}
}

// FieldTime returns the event time in the top-level field of the JSON object
// data, parsed by ParseTime.
func FieldTime(data []byte, field string) (int64, error) { return fieldTime(data, field, false) }

// fieldTime is FieldTime; valid says data is known to be valid JSON.
func fieldTime(data []byte, field string, valid bool) (int64, error) {
	raw, err := topLevelField(data, field, valid)
	if err != nil {
		return 0, err
	}
	ts, err := ParseTime(raw)
	if err != nil {
		return 0, fmt.Errorf("field %q: %w", field, err)
	}
	return ts, nil
}

// topLevelField returns the raw value of field in the JSON object data (the
// last one when it repeats, as encoding/json), scanning without decoding,
// after json.Valid unless valid says data was checked already.
func topLevelField(data []byte, field string, valid bool) ([]byte, error) {
	if !valid && !json.Valid(data) {
		return nil, fmt.Errorf("looking for field %q: the payload is not valid JSON", field)
	}
	raw, found, err := jsonscan.Member(data, field)
	switch {
	case err != nil:
		return nil, fmt.Errorf("looking for field %q: the payload is %w", field, err)
	case !found:
		return nil, fmt.Errorf("field %q is missing", field)
	}
	return raw, nil
}

// ParseTime parses a JSON value as an event time in Unix nanoseconds: a
// string in RFC 3339 (fractional seconds allowed), or a number of
// milliseconds since the Unix epoch (fractions allowed).
func ParseTime(raw []byte) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0, errors.New("empty time value")
	}
	if raw[0] == '"' {
		var s string
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
			s = string(raw[1 : len(raw)-1])
		} else if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("time %s: %w", raw, err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("time %q is not RFC 3339: %w", s, err)
		}
		if t.Before(minTime) || t.After(maxTime) {
			return 0, fmt.Errorf("time %q is outside the event times this engine represents", s)
		}
		return t.UnixNano(), nil
	}
	s := string(raw)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, fmt.Errorf("time %s ms is outside the event times this engine represents", s)
		}
		return ms * int64(time.Millisecond), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("time %s is neither an RFC 3339 string nor epoch milliseconds", raw)
	}
	ns := f * float64(time.Millisecond)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns < math.MinInt64 {
		return 0, fmt.Errorf("time %s ms is outside the event times this engine represents", s)
	}
	return int64(math.Round(ns)), nil
}

// minTime and maxTime bound the event times int64 nanoseconds represent.
var minTime, maxTime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
