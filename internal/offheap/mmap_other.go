//go:build !unix

package offheap

import "errors"

// mapAnon is not available here: buffers are on the Go heap.
func mapAnon(int) ([]byte, error) {
	return nil, errors.New("offheap: no anonymous mappings on this platform")
}

func release([]byte) {}
