// Package natstest holds what tests against a real NATS JetStream server
// share.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errStoreCreate is JetStream's "error creating store for stream"
// (JSStreamStoreFailedF).
const errStoreCreate jetstream.ErrorCode = 10049

// CreateStream creates the stream cfg, retrying at most four times when the
// server fails to create its store directory.
//
// Why: nats-server (2.9 at least) removes an account's JetStream directory
// when its last stream is deleted. A stream created at that moment, by a
// parallel test or another test package, fails with "could not create
// storage directory … no such file or directory" in the server's log and
// error code 10049 here, although a second try succeeds. Every other error
// is returned at once.
func CreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	for attempt := range 5 {
		var s jetstream.Stream
		if s, err = js.CreateStream(ctx, cfg); err == nil {
			return s, nil
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != errStoreCreate {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(time.Duration(10<<attempt) * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("%w (5 attempts)", err)
}
