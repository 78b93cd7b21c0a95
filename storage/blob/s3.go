package blob

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	gcaws "gocloud.dev/aws"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// openS3 opens an s3 bucket. It does what s3blob's URL opener does (the same parameters, passed to
// the same functions) and in addition uses credentials given in the URL, which the URL opener
// ignores: it cannot be told about them. The AWS SDK's default credential chain ends, when nothing
// else is configured, by asking the EC2 instance-metadata service (169.254.169.254); openS3 refuses
// that unless the URL opts in with instance_metadata=true, so that a pipeline sends no traffic to
// an address its user did not configure.
func openS3(ctx context.Context, loc *location) (*gcblob.Bucket, error) {
	q := cloneValues(loc.query)
	var s3opts []func(*s3.Options)
	var bopts s3blob.Options
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
	for _, key := range []string{"use_path_style", "s3ForcePathStyle"} {
		v, ok, err := boolParam(key)
		if err != nil {
			return nil, err
		}
		if ok {
			s3opts = append(s3opts, func(o *s3.Options) { o.UsePathStyle = v })
		}
	}
	if v, ok, err := boolParam("disable_https"); err != nil {
		return nil, err
	} else if ok {
		s3opts = append(s3opts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = v })
	}
	if v, ok, err := boolParam("accelerate"); err != nil {
		return nil, err
	} else if ok {
		s3opts = append(s3opts, func(o *s3.Options) { o.UseAccelerate = v })
	}
	if v, ok := take("ssetype"); ok {
		found := false
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				bopts.EncryptionType, found = t, true
			}
		}
		if !found {
			return nil, fmt.Errorf("parameter ssetype=%q: want one of %v", v, types.ServerSideEncryptionAes256.Values())
		}
	}
	if v, ok := take("kmskeyid"); ok {
		bopts.KMSEncryptionID = v
	}
	instanceMetadata, _, err := boolParam(paramInstanceMetadata)
	if err != nil {
		return nil, err
	}
	// The role is assumed here rather than by gocloud.dev, so that the credentials it is assumed
	// with are checked like any others.
	role, _ := take("role")
	if role != "" && !strings.HasPrefix(role, "arn:") {
		return nil, fmt.Errorf("parameter role=%q: want an ARN (arn:aws:iam::…)", role)
	}

	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	if loc.user != nil {
		secret, _ := loc.user.Password()
		if loc.user.Username() == "" || secret == "" {
			return nil, fmt.Errorf("credentials in the URL need both parts: s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket")
		}
		cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(loc.user.Username(), secret, ""))
	} else if !instanceMetadata && aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)) {
		return nil, fmt.Errorf("no AWS credentials are configured, and the AWS SDK would ask the EC2 instance-metadata service " +
			"(169.254.169.254) for them: give them in the URL (s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket), in the environment " +
			"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or a shared profile (AWS_PROFILE, ~/.aws/credentials), " +
			"or allow the instance-metadata service with the parameter " + paramInstanceMetadata + "=true")
	}
	if role != "" {
		if cfg.Region == "" {
			return nil, fmt.Errorf("parameter role needs a region (the parameter region, or AWS_REGION)")
		}
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), role))
	}
	// As s3blob's URL opener: the upload manager does not take this from the client.
	bopts.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, s3opts...), loc.bucket, &bopts)
}
