// Package fakes3 serves an S3-compatible API from memory (gofakes3), for
// tests and benchmarks of checkpoint storage on object storage: never for
// data anyone keeps.
package fakes3

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"
)

// Handler serves backend's buckets as gofakes3 does, and also decodes the
// aws-chunked bodies of multipart upload parts, which gofakes3 leaves
// encoded (see decodeChunkedPart).
func Handler(backend gofakes3.Backend) http.Handler {
	inner := gofakes3.New(backend).Server()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := decodeChunkedPart(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// decodeChunkedPart decodes the aws-chunked body of a multipart upload's part, which gofakes3
// decodes for whole-object PUTs only: minio-go signs uploads over plain HTTP chunk by chunk
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), and a real S3 server decodes them.
func decodeChunkedPart(r *http.Request) error {
	if !r.URL.Query().Has("partNumber") || r.Header.Get("X-Amz-Content-Sha256") != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" {
		return nil
	}
	br := bufio.NewReader(r.Body)
	var body bytes.Buffer
	for {
		line, err := br.ReadString('\n') // hex-size;chunk-signature=...\r\n
		if err != nil {
			return fmt.Errorf("aws-chunked: %w", err)
		}
		hexSize, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(hexSize, 16, 64)
		if err != nil {
			return fmt.Errorf("aws-chunked: chunk header %q: %w", line, err)
		}
		if _, err := io.CopyN(&body, br, n); err != nil {
			return fmt.Errorf("aws-chunked: %w", err)
		}
		if _, err := br.Discard(2); err != nil { // \r\n
			return fmt.Errorf("aws-chunked: %w", err)
		}
		if n == 0 {
			break
		}
	}
	r.Body = io.NopCloser(&body)
	r.ContentLength = int64(body.Len())
	r.Header.Set("Content-Length", strconv.Itoa(body.Len()))
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	return nil
}
