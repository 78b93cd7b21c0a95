// Package blob keeps checkpoints in object storage (S3 and S3-compatible stores through
// github.com/minio/minio-go, a local directory or memory; GCS, Azure Blob Storage and others
// through gocloud.dev in a build with the tag gocloud), with the semantics of storage.Local: the
// same layout (chk-%010d/<state file>, chk-%010d/_metadata), the same checksum trailer on every
// object, and a checkpoint that is complete only once its metadata object exists.
//
// # Use
//
// checkpoint.dir takes a local path or a URL; OpenStorage tells them apart:
//
//	st, err := blob.OpenStorage(ctx, "s3://my-bucket/ingest/clicks?region=eu-west-1")
//	st, err := blob.OpenStorage(ctx, "s3://KEY:SECRET@ckpt/jobs/a?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true")
//	st, err := blob.OpenStorage(ctx, "/var/lib/ingest/checkpoints") // storage.Local
//
// See Open for the URL forms and parameters. The drivers are this package's own: s3 (minio-go),
// file and mem. gocloud.dev, which served them before, is left out of the default build: with the
// AWS SDK it brought gRPC, the Google API client and OpenTelemetry into every build, about 875 MB of
// modules to download (docs/benchmarks.md, "First build"). A program built with -tags gocloud
// opens every other scheme through gocloud.dev/blob's URL mux, so gs:// and azblob:// work once it
// also imports gocloud.dev/blob/gcsblob or gocloud.dev/blob/azureblob.
//
// # Guarantees
//
//   - Atomic completion: a PUT is atomic, so an object is seen whole or not at all; the metadata is
//     written last with a conditional create (IfNotExist), so it is never replaced, and Latest can
//     only find whole metadata. Metadata that was damaged at rest fails its checksum and is skipped
//     by storage.Latest like Local's; state files are verified against their handles.
//   - A metadata write whose outcome is unknown (lost answer, client retry answered "already exists")
//     is settled by reading the object back: the same bytes mean success. If it cannot be read
//     back, the object is deleted and the write fails, so a checkpoint reported as failed does not
//     become a recovery point (as Local removes _metadata when the directory fsync fails).
//   - Listing uses the delimiter "/" under the prefix; S3, GCS and Azure list with read-after-write
//     consistency, so a checkpoint whose metadata write returned is listed complete.
//   - Discard deletes the metadata first, then every object under the checkpoint's prefix; Trim
//     (a checkpoint kept only for the files later ones build on) deletes the metadata first, then
//     every object under the prefix whose name it is not told to keep.
//   - No message or Location shows credentials given in the URL, nor the value of a parameter whose
//     name suggests a secret.
//   - Retries are minio-go's, bounded to 3 attempts with jittered exponential backoff (200 ms to
//     1 s), for network errors and the statuses 408, 429, 499, 5xx; every call except state-file
//     transfers is bounded by Options.Timeout, so a hung request fails instead of stalling.
//
// # Locking
//
// Object stores have no flock. Storage implements storage.Locker with a lease: a lock object
// <prefix>.lease created with IfNotExist and renewed every Lease/3. A holder that could not renew
// it for 3/4 of Lease (the store did not answer) refuses every call with storage.ErrLockLapsed
// until a renewal finds the object unchanged by anyone else, and then holds the lock again: an
// outage of the store longer than the lease costs a job a restart, not its lock. A holder that
// finds the object deleted or naming another owner has lost it for good (storage.ErrLocked: the
// job stops). Another process takes over a lock only after watching it unchanged for a whole
// Lease, or at once if it names a dead process of the same PID namespace (a crash on the same
// machine). The protocol and its limits are described in lock.go; in short, it assumes requests
// are not delayed by more than Lease/4, and the metadata's conditional create remains a second
// line of defence.
//
// # Slow calls
//
// Storage implements storage.SlowCallReporter: a job gives it its log, and a call outstanding
// longer than storage.DefaultSlowCall (10 s) is logged at WARN, naming the call and the location,
// once a minute while it hangs, and at INFO when it returns. The lock's lapses (WARN), renewals
// after a lapse (INFO) and loss (ERROR) go to the same log.
//
// # Limits
//
//   - file:// writes a temporary file next to the object, fsyncs it and renames it into place, or
//     hard-links it for the metadata's conditional create (atomic across processes: the
//     filesystem must support hard links), then fsyncs the directory. It uses the lease, not
//     flock; a plain path (storage.Local) is the usual choice for local checkpoints.
//   - mem:// buckets live in this process only (a named one survives a reopen of its URL).
//   - S3: a state file above 16 MiB (minio-go's part size) is uploaded in parts, which is still
//     atomic; metadata and lock objects are always one conditional PUT (If-None-Match: *, up to
//     5 GiB). A state file must fit in memory, as the Storage interface already requires.
//   - S3 bucket names must follow S3's rules (3 to 63 characters; minio-go checks them at Open).
package blob
