package natstest

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// flaky fails its first fails CreateStream calls with err.
type flaky struct {
	jetstream.JetStream
	fails, calls int
	err          error
}

func (f *flaky) CreateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, f.err
	}
	return nil, nil
}

// The store error is retried, at most five times in all; any other error
// is returned at once.
func TestCreateStreamRetriesOnlyTheStoreError(t *testing.T) {
	store := &jetstream.APIError{Code: 500, ErrorCode: errStoreCreate, Description: "error creating store for stream"}
	other := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse, Description: "stream name already in use"}
	for _, c := range []struct {
		name      string
		fails     int
		err       error
		wantCalls int
		wantErr   bool
	}{
		{"store error twice", 2, store, 3, false},
		{"store error always", 100, store, 5, true},
		{"other API error", 100, other, 1, true},
		{"not an API error", 100, errors.New("connection closed"), 1, true},
	} {
		f := &flaky{fails: c.fails, err: c.err}
		_, err := CreateStream(context.Background(), f, jetstream.StreamConfig{Name: "S"})
		if (err != nil) != c.wantErr || f.calls != c.wantCalls {
			t.Errorf("%s: %d calls, error %v; want %d calls, error %v", c.name, f.calls, err, c.wantCalls, c.wantErr)
		}
		if c.wantErr && !errors.Is(err, c.err) {
			t.Errorf("%s: %v does not wrap %v", c.name, err, c.err)
		}
	}
}
