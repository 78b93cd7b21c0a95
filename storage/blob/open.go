package blob

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

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
//	file:///absolute/directory     a local directory (see the package doc)
//	mem://name[/prefix]            a process-wide in-memory bucket, for tests
//	gs://bucket[/prefix]           only in a build with the tag gocloud and the gcsblob driver
//	azblob://container[/prefix]    only in a build with the tag gocloud and the azureblob driver
//
// The prefix may also be given as the parameter prefix=. The parameters lease and timeout set
// Options. An s3 URL takes these parameters besides (the names and meanings of gocloud.dev's
// s3blob, which served s3 URLs before minio-go):
//
//	endpoint=URL            an S3-compatible server, http(s)://host[:port] (no path)
//	region=R                else AWS_REGION, else the profile's region, else asked of the store
//	profile=NAME            the shared-configuration profile for credentials and region
//	role=ARN                assume this IAM role (STS AssumeRole) with the credentials found
//	use_path_style=BOOL     path-style addressing (also s3ForcePathStyle, hostname_immutable);
//	                        the default is virtual-hosted on AWS and path-style elsewhere
//	disable_https=BOOL      plain HTTP
//	dualstack, fips, accelerate=BOOL   AWS's dual-stack, FIPS and transfer-acceleration endpoints
//	anonymous=BOOL          unsigned requests
//	instance_metadata=BOOL  allow the EC2 instance-metadata service as the last credential source
//	ssetype=AES256|aws:kms|aws:kms:dsse, kmskeyid=ID   server-side encryption of every object
//	request_checksum_calculation, response_checksum_validation=when_supported|when_required
//	                        when_supported adds a CRC32C checksum to uploads / checks the store's
//	                        checksum on downloads (every object carries its own CRC-32C anyway)
//
// Any other parameter is an error. Credentials in an s3 URL are used as static credentials;
// without them the first configured of the environment, a shared profile, web identity and
// container credentials is used (see openS3), never the EC2 instance-metadata service
// (169.254.169.254) unless the URL sets instance_metadata=true: an s3 URL for which nothing else
// provides credentials is refused, naming the ways to give them. No message, Location() or error
// shows the credentials or the value of a parameter whose name suggests a secret.
//
// A file URL takes create_dir=false (the directory must exist) and, for URLs written for
// gocloud.dev's fileblob, no_tmp_dir=true and metadata=skip, which change nothing.
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
func openBucket(ctx context.Context, loc *location) (b bucket, owned bool, err error) {
	switch loc.scheme {
	case "mem":
		if len(loc.query) > 0 {
			return nil, false, fmt.Errorf("mem URLs take no parameters besides lease, timeout and prefix")
		}
		if loc.bucket == "" {
			return newMemStore(), true, nil
		}
		return memBucket(loc.bucket), false, nil
	case "file":
		q := cloneValues(loc.query)
		create := true
		if v, ok := q["create_dir"]; ok {
			if create, err = strconv.ParseBool(v[0]); err != nil {
				return nil, false, fmt.Errorf("parameter create_dir=%q: want true or false", v[0])
			}
			q.Del("create_dir")
		}
		// Parameters of gocloud.dev's fileblob, which served file URLs before, with the values
		// this package always gave them.
		for key, want := range map[string]string{"no_tmp_dir": "true", "metadata": "skip"} {
			if v, ok := q[key]; ok && v[0] != want {
				return nil, false, fmt.Errorf("parameter %s=%q: file URLs support only %s=%s", key, v[0], key, want)
			}
			q.Del(key)
		}
		if len(q) > 0 {
			return nil, false, fmt.Errorf("file URLs take no parameters besides lease, timeout and create_dir")
		}
		f, err := openFileStore(loc.dir, create)
		return f, true, err
	case "s3":
		b, err := openS3(ctx, loc)
		return b, true, err
	default:
		if openOther != nil {
			return openOther(ctx, loc)
		}
		return nil, false, fmt.Errorf("no driver for scheme %q in this binary (linked: s3, file, mem); gs and azblob need a build "+
			`with -tags gocloud whose main package has import _ "gocloud.dev/blob/gcsblob" or _ "gocloud.dev/blob/azureblob"`, loc.scheme)
	}
}

// openOther opens buckets of schemes this package has no driver of; nil unless the build has the
// tag gocloud (gocloud.go).
var openOther func(ctx context.Context, loc *location) (bucket, bool, error)

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}
