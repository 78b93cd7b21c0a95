package blob_test

import (
	"context"

	"github.com/ingest-engine/ingest/storage/blob"
)

// The URL forms of the package documentation. (Compiled, not run: the
// first two need the stores.)
func ExampleOpenStorage() {
	ctx := context.Background()
	for _, dir := range []string{
		"s3://my-bucket/ingest/clicks?region=eu-west-1",
		"s3://KEY:SECRET@ckpt/jobs/a?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true",
		"/var/lib/ingest/checkpoints", // storage.Local
	} {
		st, err := blob.OpenStorage(ctx, dir)
		_, _ = st, err
	}
}
