package blob

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// s3Attempts is how many times a request is sent before its error is returned (the AWS SDK's
// standard retryer, which this package used before, made 3 attempts too). Retries back off
// exponentially with jitter, from 200 ms up to 1 s.
const s3Attempts = 3

// s3Params are the parameters an s3 URL may carry besides lease, timeout and prefix. The names
// are those gocloud.dev's s3blob URL opener took, which this package used before minio-go.
var s3Params = []string{
	"endpoint", "region", "profile", "role", "anonymous", paramInstanceMetadata,
	"use_path_style", "s3ForcePathStyle", "hostname_immutable", "disable_https", "dualstack", "fips", "accelerate",
	"ssetype", "kmskeyid", "request_checksum_calculation", "response_checksum_validation", "awssdk",
}

// s3Bucket is the bucket of s3 URLs, through minio-go.
type s3Bucket struct {
	c         *minio.Client   // immutable
	transport *http.Transport // immutable; closed by close
	name      string          // immutable
	sse       encrypt.ServerSide
	// verify asks the store for the object's checksum on reads and checks it
	// (response_checksum_validation=when_supported).
	verify bool
}

// openS3 opens an s3 bucket. Credentials come from the URL (s3://KEY:SECRET@bucket), or else from
// the first of these that is configured, as the AWS SDK looks them up: the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), a shared profile (profile=, or
// AWS_PROFILE, or "default", in ~/.aws/credentials and ~/.aws/config: static keys, SSO or
// credential_process), web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), container
// credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), and, only with
// instance_metadata=true, the EC2 instance-metadata service (169.254.169.254, or
// AWS_EC2_METADATA_SERVICE_ENDPOINT), so that a pipeline sends no traffic to an address its user
// did not configure. role=ARN assumes that role with those credentials through STS.
func openS3(_ context.Context, loc *location) (bucket, error) {
	if err := s3utils.CheckValidBucketName(loc.bucket); err != nil {
		return nil, fmt.Errorf("bucket %q: %w", loc.bucket, err)
	}
	q := cloneValues(loc.query)
	for name := range q {
		if !slices.Contains(s3Params, name) {
			return nil, fmt.Errorf("unknown parameter %q for s3 URLs (known: lease, timeout, prefix, %s)", name, strings.Join(s3Params, ", "))
		}
	}
	take := func(key string) (string, bool) {
		v, ok := q[key]
		q.Del(key)
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	boolParam := func(key string) (value, ok bool, err error) {
		v, ok := take(key)
		if !ok {
			return false, false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, false, fmt.Errorf("parameter %s=%q: want true or false", key, v)
		}
		return b, true, nil
	}
	type boolSetting struct{ value, set bool }
	bools := map[string]boolSetting{}
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "hostname_immutable", "disable_https", "dualstack",
		"fips", "accelerate", "anonymous", paramInstanceMetadata} {
		v, ok, err := boolParam(key)
		if err != nil {
			return nil, err
		}
		bools[key] = boolSetting{v, ok}
	}
	flag := func(key string) bool { return bools[key].value }

	region, _ := take("region")
	profile, _ := take("profile")
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		region = profileRegion(profile)
	}

	// Where to send requests.
	secure, host := !flag("disable_https"), "s3.amazonaws.com"
	if e, ok := take("endpoint"); ok {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("parameter endpoint=%q: want http://host[:port] or https://host[:port]", redactRaw(e))
		}
		if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return nil, fmt.Errorf("parameter endpoint: the S3 client takes no path or query in the endpoint, only scheme://host[:port]")
		}
		host, secure = u.Host, u.Scheme == "https" && !flag("disable_https")
	} else if flag("fips") {
		if region == "" {
			return nil, fmt.Errorf("parameter fips needs a region (the parameter region, or AWS_REGION)")
		}
		host = "s3-fips." + region + ".amazonaws.com"
	}
	lookup := minio.BucketLookupAuto // virtual-hosted on AWS, path-style elsewhere
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "hostname_immutable"} {
		if b := bools[key]; b.set && b.value {
			lookup = minio.BucketLookupPath
		}
	}
	for _, key := range []string{"use_path_style", "s3ForcePathStyle"} {
		if b := bools[key]; b.set && !b.value {
			if lookup == minio.BucketLookupPath {
				return nil, fmt.Errorf("parameter %s=false contradicts path-style addressing asked for by another parameter", key)
			}
			lookup = minio.BucketLookupDNS
		}
	}

	// Encryption at rest.
	var sse encrypt.ServerSide
	ssetype, _ := take("ssetype")
	kmsKey, _ := take("kmskeyid")
	switch t := strings.ToLower(ssetype); {
	case t == "" && kmsKey == "":
	case t == "aes256" && kmsKey == "":
		sse = sseHeader{typ: encrypt.S3, value: "AES256"}
	case t == "" || t == "aws:kms" || t == "aws:kms:dsse":
		if t == "" {
			t = "aws:kms"
		}
		sse = sseHeader{typ: encrypt.KMS, value: t, key: kmsKey}
	case t == "aes256":
		return nil, fmt.Errorf("parameter kmskeyid needs ssetype=aws:kms or aws:kms:dsse, not %s", ssetype)
	default:
		return nil, fmt.Errorf("parameter ssetype=%q: want one of AES256, aws:kms, aws:kms:dsse", ssetype)
	}

	// Checksums beyond the checksum trailer every object carries anyway.
	trailing, verify := false, false
	for key, dst := range map[string]*bool{"request_checksum_calculation": &trailing, "response_checksum_validation": &verify} {
		switch v, _ := take(key); strings.ToLower(v) {
		case "", "when_required":
		case "when_supported":
			*dst = true
		default:
			return nil, fmt.Errorf("parameter %s=%q: want when_supported or when_required", key, v)
		}
	}
	take("awssdk") // gocloud.dev's choice of AWS SDK version: meaningless here

	role, _ := take("role")
	if role != "" && !strings.HasPrefix(role, "arn:") {
		return nil, fmt.Errorf("parameter role=%q: want an ARN (arn:aws:iam::…)", role)
	}
	creds, err := s3Credentials(loc, profile, region, flag("anonymous"), flag(paramInstanceMetadata))
	if err != nil {
		return nil, err
	}
	if role != "" {
		if region == "" {
			return nil, fmt.Errorf("parameter role needs a region (the parameter region, or AWS_REGION)")
		}
		creds = credentials.New(&assumeRole{base: creds, role: role, region: region, endpoint: stsEndpoint(region)})
	}

	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	c, err := minio.New(host, &minio.Options{
		Creds:           creds,
		Secure:          secure,
		Region:          region, // empty: asked of the store (GetBucketLocation) once
		BucketLookup:    lookup,
		Transport:       transport,
		MaxRetries:      s3Attempts,
		TrailingHeaders: trailing,
	})
	if err != nil {
		return nil, err
	}
	// As the AWS SDK: dual-stack and accelerated endpoints only when asked for. Both apply to
	// AWS endpoints only.
	c.SetS3EnableDualstack(flag("dualstack"))
	if flag("accelerate") {
		c.SetS3TransferAccelerate("s3-accelerate.amazonaws.com")
	}
	return &s3Bucket{c: c, transport: transport, name: loc.bucket, sse: sse, verify: verify}, nil
}

// sseHeader is server-side encryption by the x-amz-server-side-encryption header: AES256 (SSE-S3),
// aws:kms or aws:kms:dsse with an optional key id.
type sseHeader struct {
	typ        encrypt.Type
	value, key string
}

// Type implements encrypt.ServerSide.
func (s sseHeader) Type() encrypt.Type { return s.typ }

// Marshal implements encrypt.ServerSide.
func (s sseHeader) Marshal(h http.Header) {
	h.Set(encrypt.SseGenericHeader, s.value)
	if s.key != "" {
		h.Set(encrypt.SseKmsKeyID, s.key)
	}
}

// s3Credentials returns the credentials of an s3 URL (see openS3), or an error naming the ways to
// give them when nothing provides them.
func s3Credentials(loc *location, profile, region string, anonymous, instanceMetadata bool) (*credentials.Credentials, error) {
	if loc.user != nil {
		secret, _ := loc.user.Password()
		if loc.user.Username() == "" || secret == "" {
			return nil, fmt.Errorf("credentials in the URL need both parts: s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket")
		}
		return credentials.NewStaticV4(loc.user.Username(), secret, ""), nil
	}
	if anonymous {
		return credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}}), nil
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_ACCESS_KEY") != "" {
		return credentials.New(&credentials.EnvAWS{}), nil
	}
	if ok, err := profileHasCredentials(profile); err != nil {
		return nil, err
	} else if ok {
		return credentials.New(&credentials.FileAWSCredentials{Profile: profileName(profile)}), nil
	}
	if os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" || os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "" ||
		os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "" {
		// minio-go's IAM provider takes these from the environment: web identity through STS,
		// or the container credentials endpoint.
		return credentials.New(&credentials.IAM{Region: region}), nil
	}
	if !instanceMetadata {
		return nil, fmt.Errorf("no AWS credentials are configured, and the last resort would be to ask the EC2 instance-metadata service " +
			"(169.254.169.254) for them: give them in the URL (s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket), in the environment " +
			"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or a shared profile (AWS_PROFILE, ~/.aws/credentials), " +
			"or allow the instance-metadata service with the parameter " + paramInstanceMetadata + "=true")
	}
	if v, _ := strconv.ParseBool(os.Getenv("AWS_EC2_METADATA_DISABLED")); v {
		return nil, fmt.Errorf("%s=true, but AWS_EC2_METADATA_DISABLED is set: no credentials are configured", paramInstanceMetadata)
	}
	return credentials.New(&credentials.IAM{Endpoint: os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"), Region: region}), nil
}

// stsEndpoint returns the STS endpoint of region: AWS_ENDPOINT_URL_STS when set (as the AWS SDK
// reads it), else the regional endpoint.
func stsEndpoint(region string) string {
	if e := os.Getenv("AWS_ENDPOINT_URL_STS"); e != "" {
		return e
	}
	if strings.HasPrefix(region, "cn-") {
		return "https://sts." + region + ".amazonaws.com.cn"
	}
	return "https://sts." + region + ".amazonaws.com"
}

// assumeRole provides the credentials of an IAM role, assumed through STS with base credentials
// each time the previous ones expire (base may be temporary too).
type assumeRole struct {
	credentials.Expiry
	base                   *credentials.Credentials
	role, region, endpoint string
}

// RetrieveWithCredContext implements credentials.Provider.
func (a *assumeRole) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	if cc == nil {
		cc = &credentials.CredContext{Client: http.DefaultClient}
	}
	v, err := a.base.GetWithContext(cc)
	if err != nil {
		return credentials.Value{}, fmt.Errorf("the credentials to assume role %s with: %w", a.role, err)
	}
	sts := &credentials.STSAssumeRole{STSEndpoint: a.endpoint, Options: credentials.STSAssumeRoleOptions{
		AccessKey: v.AccessKeyID, SecretKey: v.SecretAccessKey, SessionToken: v.SessionToken,
		Location: a.region, RoleARN: a.role, RoleSessionName: fmt.Sprintf("ingest-%d", time.Now().UnixNano()),
	}}
	out, err := sts.RetrieveWithCredContext(cc)
	if err != nil {
		return credentials.Value{}, fmt.Errorf("assume role %s: %w", a.role, err)
	}
	a.SetExpiration(out.Expiration, credentials.DefaultExpiryWindow)
	return out, nil
}

// Retrieve implements credentials.Provider.
func (a *assumeRole) Retrieve() (credentials.Value, error) { return a.RetrieveWithCredContext(nil) }

// classify marks minio-go's "no such key" and "precondition failed" errors as errNotExist and
// errExists.
func classify(err error) error {
	if err == nil {
		return nil
	}
	r := minio.ToErrorResponse(err)
	switch {
	case r.StatusCode == http.StatusPreconditionFailed || r.Code == minio.PreconditionFailed:
		return &driverError{kind: errExists, err: err}
	case r.Code == minio.NoSuchKey || (r.StatusCode == http.StatusNotFound && r.Code != minio.NoSuchBucket):
		return &driverError{kind: errNotExist, err: err}
	}
	return err
}

func (b *s3Bucket) put(ctx context.Context, key string, parts [][]byte, ifNotExist bool) error {
	r := newPartsReader(parts)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", ServerSideEncryption: b.sse,
		// An empty object with minio-go's streaming signature (plain HTTP) goes out without a
		// Content-Length, which S3 servers refuse; unsigned, an empty body carries one.
		DisableContentSha256: r.size == 0}
	if ifNotExist {
		// If-None-Match: * on a single PUT (up to 5 GiB): a multipart upload would need the
		// condition on its completion instead.
		opts.SetMatchETagExcept("*")
		opts.DisableMultipart = true
	}
	_, err := b.c.PutObject(ctx, b.name, key, r, r.size, opts)
	return classify(err)
}

func (b *s3Bucket) get(ctx context.Context, key string) ([]byte, error) {
	obj, err := b.c.GetObject(ctx, b.name, key, minio.GetObjectOptions{Checksum: b.verify})
	if err != nil {
		return nil, classify(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, classify(err)
	}
	return data, nil
}

func (b *s3Bucket) exists(ctx context.Context, key string) (bool, error) {
	_, err := b.c.StatObject(ctx, b.name, key, minio.StatObjectOptions{})
	switch err := classify(err); {
	case err == nil:
		return true, nil
	case isNotExist(err):
		return false, nil
	default:
		return false, err
	}
}

func (b *s3Bucket) del(ctx context.Context, key string) error {
	err := classify(b.c.RemoveObject(ctx, b.name, key, minio.RemoveObjectOptions{}))
	if isNotExist(err) {
		return nil
	}
	return err
}

func (b *s3Bucket) list(ctx context.Context, prefix string, delimiter bool) ([]listEntry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine
	var out []listEntry
	for obj := range b.c.ListObjects(ctx, b.name, minio.ListObjectsOptions{Prefix: prefix, Recursive: !delimiter}) {
		if obj.Err != nil {
			return nil, classify(obj.Err)
		}
		out = append(out, listEntry{key: obj.Key, isDir: delimiter && strings.HasSuffix(obj.Key, "/")})
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the listing may have stopped early
	}
	return out, nil
}

func (b *s3Bucket) close() error {
	b.transport.CloseIdleConnections()
	return nil
}
