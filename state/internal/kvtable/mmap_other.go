//go:build !unix

package kvtable

import "errors"

// mmapAnon is not available here: every chunk is a Go slice.
func mmapAnon(int) ([]byte, error) {
	return nil, errors.New("kvtable: no anonymous mappings on this platform")
}

func munmap([]byte) {}
