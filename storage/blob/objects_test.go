package blob

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// Objects stores plain objects under its URL's prefix, on every driver:
// what Put stores Get returns byte for byte (no trailer), List finds keys
// at any depth relative to the prefix and nothing outside it, a missing
// object is fs.ErrNotExist, Delete of a missing one is no error, and no
// message shows the URL's credentials.
func TestObjects(t *testing.T) {
	s3 := newFakeS3(t)
	for _, raw := range []string{"mem://objects-test/wh", "file://" + t.TempDir() + "/wh", s3.url("wh")} {
		t.Run(strings.SplitN(raw, ":", 2)[0], func(t *testing.T) {
			ctx := context.Background()
			o, err := OpenObjects(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			for key, data := range map[string]string{"t/data/a.parquet": "PAR1 a", "t/data/sub/b.parquet": "PAR1 b", "t/metadata/v1.json": "{}"} {
				if err := o.Put(ctx, key, [][]byte{[]byte(data[:2]), []byte(data[2:])}); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := o.Get(ctx, "t/data/sub/b.parquet"); err != nil || string(got) != "PAR1 b" {
				t.Fatalf("Get: %q, %v", got, err)
			}
			keys, err := o.List(ctx, "t/data/")
			slices.Sort(keys)
			if err != nil || !slices.Equal(keys, []string{"t/data/a.parquet", "t/data/sub/b.parquet"}) {
				t.Fatalf("List: %v, %v", keys, err)
			}
			if err := o.Delete(ctx, "t/data/a.parquet"); err != nil {
				t.Fatal(err)
			}
			if err := o.Delete(ctx, "t/data/a.parquet"); err != nil {
				t.Fatalf("deleting a missing object: %v", err)
			}
			_, err = o.Get(ctx, "t/data/a.parquet")
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Get of a deleted object: %v, want fs.ErrNotExist", err)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
	if _, err := OpenObjects(context.Background(), "mem://x?lease=30s"); err == nil {
		t.Fatal("a checkpoint storage parameter was accepted")
	}
}
