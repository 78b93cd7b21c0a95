package blob

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	gcblob "gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	"gocloud.dev/blob/memblob"

	"github.com/ingest-engine/ingest/storage"
)

// OpenStorage opens checkpoint storage from the value of checkpoint.dir: a URL
// (s3://, gs://, azblob://, file://, mem://, see Open) opens a blob Storage with the default
// Options, anything else is a local directory opened with storage.NewLocal.
func OpenStorage(ctx context.Context, dirOrURL string) (storage.Storage, error) {
	if !IsURL(dirOrURL) {
		return storage.NewLocal(dirOrURL)
	}
	s, err := Open(ctx, dirOrURL, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Open returns checkpoint storage at rawURL; o may be nil for the defaults. The URL forms:
//
//	s3://[KEY:SECRET@]bucket[/prefix][?endpoint=http://host:port&region=R&use_path_style=true&...]
//	gs://bucket[/prefix]           needs the gcsblob driver linked in (see the package doc)
//	azblob://container[/prefix]    needs the azureblob driver linked in
//	file:///absolute/directory     a local directory through fileblob (not durable: see the package doc)
//	mem://name[/prefix]            a process-wide in-memory bucket, for tests
//
// The prefix may also be given as the parameter prefix=. The parameters lease and timeout set
// Options; every other parameter goes to the gocloud.dev driver (for s3 see
// gocloud.dev/aws.V2ConfigFromURLParams and gocloud.dev/blob/s3blob.URLOpener). Credentials in
// an s3 URL are used as static credentials; without them the AWS SDK's default chain applies
// (environment, shared config and profiles, web identity, container credentials), except its last
// resort, the EC2 instance-metadata service (169.254.169.254): an s3 URL for which nothing else
// provides credentials is refused, naming the ways to give them, unless it sets
// instance_metadata=true (as on an EC2 instance with a role; a profile whose credential_source is
// Ec2InstanceMetadata needs it too). The parameter role=ARN assumes that role with those
// credentials. No message, Location() or error shows the credentials or the value of a parameter
// whose name suggests a secret.
//
// Close releases the bucket.
func Open(ctx context.Context, rawURL string, o *Options) (*Storage, error) {
	loc, err := parseLocation(rawURL)
	if err != nil {
		return nil, err
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts, err = opts.merge(loc); err != nil {
		return nil, err
	}
	b, owned, err := openBucket(ctx, loc)
	if err != nil {
		return nil, scrub(fmt.Errorf("storage/blob: open %s: %w", loc.base, err), loc.secrets)
	}
	return newStorage(b, owned, loc, opts), nil
}

// openBucket opens the bucket loc names. owned says whether closing the Storage closes it (named
// mem buckets live as long as the process).
func openBucket(ctx context.Context, loc *location) (b *gcblob.Bucket, owned bool, err error) {
	switch loc.scheme {
	case "mem":
		if len(loc.query) > 0 {
			return nil, false, fmt.Errorf("mem URLs take no parameters besides lease, timeout and prefix")
		}
		if loc.bucket == "" {
			return memblob.OpenBucket(nil), true, nil
		}
		return memBucket(loc.bucket), false, nil
	case "file":
		q := cloneValues(loc.query)
		// Create the directory like storage.NewLocal does; write temporary files next to their
		// final name so the closing rename never crosses filesystems; write no attribute sidecar
		// files (nothing here reads content types).
		setDefault(q, "create_dir", "true")
		setDefault(q, "no_tmp_dir", "true")
		setDefault(q, "metadata", "skip")
		b, err := gcblob.DefaultURLMux().OpenBucketURL(ctx, &url.URL{Scheme: "file", Path: loc.dir, RawQuery: q.Encode()})
		return b, true, err
	case "s3":
		b, err := openS3(ctx, loc)
		return b, true, err
	default:
		mux := gcblob.DefaultURLMux()
		if !mux.ValidBucketScheme(loc.scheme) {
			return nil, false, fmt.Errorf("no driver for scheme %q in this binary (linked: %v); gs and azblob need "+
				`import _ "gocloud.dev/blob/gcsblob" or _ "gocloud.dev/blob/azureblob" in the main package`, loc.scheme, mux.BucketSchemes())
		}
		b, err := mux.OpenBucketURL(ctx, &url.URL{Scheme: loc.scheme, Host: loc.bucket, RawQuery: loc.query.Encode()})
		return b, true, err
	}
}

// memBuckets holds the named in-memory buckets of mem:// URLs, so that opening the same URL twice
// (a restart in the same process) finds the same checkpoints. They are never freed.
var memBuckets = struct {
	sync.Mutex
	m map[string]*gcblob.Bucket
}{m: map[string]*gcblob.Bucket{}}

// memBucket returns the process-wide in-memory bucket called name, creating it if needed.
func memBucket(name string) *gcblob.Bucket {
	memBuckets.Lock()
	defer memBuckets.Unlock()
	b := memBuckets.m[name]
	if b == nil {
		b = memblob.OpenBucket(nil)
		memBuckets.m[name] = b
	}
	return b
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

func setDefault(q url.Values, key, value string) {
	if _, ok := q[key]; !ok {
		q.Set(key, value)
	}
}
