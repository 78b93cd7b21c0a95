package blob

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The credential sources of an s3 URL without credentials in it, in the AWS SDK's order, and
// role= on top of them. Each test empties the environment's AWS configuration first.

// signedBy records the access key of every request the fake store gets, and the session token.
type signedBy struct {
	mu     sync.Mutex
	keys   map[string]int
	tokens map[string]int
	scopes map[string]int // the region/service part of the credential scope
}

// record installs itself as f's fault hook (passing every request).
func record(f *fakeS3) *signedBy {
	s := &signedBy{keys: map[string]int{}, tokens: map[string]int{}, scopes: map[string]int{}}
	f.setFaults(func(r *http.Request) (int, bool) {
		auth := r.Header.Get("Authorization")
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, cred, ok := strings.Cut(auth, "Credential="); ok {
			cred, _, _ = strings.Cut(cred, ",")
			parts := strings.Split(cred, "/") // KEY/DATE/REGION/SERVICE/aws4_request
			if len(parts) == 5 {
				s.keys[parts[0]]++
				s.scopes[parts[2]+"/"+parts[3]]++
			}
		} else {
			s.keys[""]++
		}
		s.tokens[r.Header.Get("X-Amz-Security-Token")]++
		return 0, false
	})
	return s
}

// only reports whether every request was signed with key, region and token (and there was one).
func (s *signedBy) only(key, region, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys) == 1 && s.keys[key] > 0 && len(s.tokens) == 1 && s.tokens[token] > 0 &&
		len(s.scopes) == 1 && s.scopes[region+"/s3"] > 0
}

func (s *signedBy) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("keys %v, tokens %v, scopes %v", s.keys, s.tokens, s.scopes)
}

// bareURL is the fake store's URL for prefix without credentials, and with extra parameters.
func bareURL(f *fakeS3, prefix string, extra ...string) string {
	u := fmt.Sprintf("s3://ckpt/%s?endpoint=%s&use_path_style=true", prefix, f.srv.URL)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// useS3 opens raw and lists it, failing the test on an error.
func useS3(t *testing.T, raw string) {
	t.Helper()
	s, err := Open(context.Background(), raw, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, err := s.List(context.Background()); err != nil {
		t.Fatalf("List: %v", err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestS3CredentialsFromTheEnvironment(t *testing.T) {
	noAWSConfig(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_SESSION_TOKEN", "env-token")
	t.Setenv("AWS_REGION", "eu-north-1")
	f := newFakeS3(t)
	got := record(f)
	useS3(t, bareURL(f, "p"))
	if !got.only("AKIDFROMENV", "eu-north-1", "env-token") {
		t.Fatalf("requests were signed with %s; want the environment's key, token and region", got)
	}
}

// A profile gives the credentials and the region (from the config file); profile= picks it, and
// AWS_PROFILE does when the URL does not.
func TestS3CredentialsFromAProfile(t *testing.T) {
	noAWSConfig(t)
	dir := t.TempDir()
	creds, config := filepath.Join(dir, "credentials"), filepath.Join(dir, "config")
	writeFile(t, creds, "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n"+
		"[prod]\n# the production account\naws_access_key_id = AKIDPROD\naws_secret_access_key = p\n")
	writeFile(t, config, "[default]\nregion = us-west-2\n\n[profile prod]\nregion = ap-south-1\ns3 =\n  addressing_style = path\n")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", config)
	for _, tc := range []struct {
		name, param, env, key, region string
	}{
		{"default", "", "", "AKIDDEFAULT", "us-west-2"},
		{"parameter", "profile=prod", "", "AKIDPROD", "ap-south-1"},
		{"AWS_PROFILE", "", "prod", "AKIDPROD", "ap-south-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_PROFILE", tc.env)
			f := newFakeS3(t)
			got := record(f)
			useS3(t, bareURL(f, "p", tc.param))
			if !got.only(tc.key, tc.region, "") {
				t.Fatalf("requests were signed with %s; want key %s in region %s", got, tc.key, tc.region)
			}
		})
	}

	// A profile named but not defined, and one that assumes a role, are refused at Open.
	writeFile(t, config, "[profile chained]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = default\n")
	f := newFakeS3(t)
	for param, want := range map[string]string{
		"profile=nosuch":  `AWS profile "nosuch" is not defined`,
		"profile=chained": "role=ARN",
	} {
		if _, err := Open(context.Background(), bareURL(f, "p", param, "region=us-east-1"), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open with %s = %v, want an error saying %q", param, err, want)
		}
	}
}

// role=ARN assumes the role through STS (AWS_ENDPOINT_URL_STS points at a fake) with the
// credentials found, and signs the store's requests with the role's temporary credentials.
func TestS3AssumeRole(t *testing.T) {
	noAWSConfig(t)
	const role = "arn:aws:iam::123456789012:role/ingest"
	var mu sync.Mutex
	var calls []string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, r.Form.Get("Action")+" "+r.Form.Get("RoleArn")+" signed "+r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>`+
			`<Credentials><AccessKeyId>ASIAASSUMED</AccessKeyId><SecretAccessKey>role-secret</SecretAccessKey>`+
			`<SessionToken>role-token</SessionToken><Expiration>%s</Expiration></Credentials>`+
			`</AssumeRoleResult></AssumeRoleResponse>`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(sts.Close)
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	f := newFakeS3(t)
	got := record(f)
	useS3(t, f.url("p", "role="+role))
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "AssumeRole "+role+" signed ") || !strings.Contains(calls[0], "Credential="+testKeyID+"/") {
		t.Fatalf("STS calls %q; want one AssumeRole of %s signed with the URL's key", calls, role)
	}
	if !got.only("ASIAASSUMED", "us-east-1", "role-token") {
		t.Fatalf("requests were signed with %s; want the role's temporary credentials", got)
	}
}

// anonymous=true sends unsigned requests, without looking for credentials.
func TestS3Anonymous(t *testing.T) {
	noAWSConfig(t)
	f := newFakeS3(t)
	got := record(f)
	useS3(t, bareURL(f, "p", "anonymous=true", "region=us-east-1"))
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.keys) != 1 || got.keys[""] == 0 {
		t.Fatalf("requests were signed with %v; want none signed", got.keys)
	}
}

// The parameters gocloud.dev's s3blob took are still accepted or refused with a reason; unknown
// ones are refused, naming the known ones.
func TestS3Parameters(t *testing.T) {
	f := newFakeS3(t)
	for _, extra := range []string{"ssetype=AES256", "kmskeyid=k1", "ssetype=aws:kms:dsse&kmskeyid=k1", "s3ForcePathStyle=true",
		"hostname_immutable=true", "dualstack=false", "request_checksum_calculation=when_required",
		"response_checksum_validation=when_supported", "awssdk=v2", "disable_https=false"} {
		s, err := Open(context.Background(), f.url("p", extra), nil)
		if err != nil {
			t.Errorf("Open with %s: %v", extra, err)
			continue
		}
		s.Close()
	}
	creds := "s3://" + testKeyID + ":" + testSecret + "@ckpt/p?region=us-east-1&"
	for raw, want := range map[string]string{
		f.url("p", "bogus=1"):                                  `unknown parameter "bogus"`,
		f.url("p", "rate_limiter_capacity=5"):                  "known: lease, timeout, prefix, endpoint",
		f.url("p", "ssetype=rot13"):                            "want one of AES256",
		f.url("p", "ssetype=AES256&kmskeyid=k-77"):             "kmskeyid needs ssetype=aws:kms",
		f.url("p", "request_checksum_calculation=maybe"):       "want when_supported or when_required",
		f.url("p", "fips=yes"):                                 "want true or false",
		f.url("p", "role=ingest"):                              "want an ARN",
		creds + "hostname_immutable=true&use_path_style=false": "contradicts",
		creds + "endpoint=ftp://x":                             "want http://host",
		creds + "endpoint=http://127.0.0.1:9/some/path":        "no path",
		"s3://ab/p?region=us-east-1":                           "shorter than 3",
	} {
		if _, err := Open(context.Background(), raw, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want an error saying %q", raw, err, want)
		}
	}
}

// ssetype and kmskeyid reach the store as the server-side-encryption headers of every upload.
func TestS3ServerSideEncryption(t *testing.T) {
	f := newFakeS3(t)
	var mu sync.Mutex
	seen := map[string]int{}
	f.setFaults(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodPut {
			mu.Lock()
			seen[r.Header.Get("X-Amz-Server-Side-Encryption")+" "+r.Header.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id")]++
			mu.Unlock()
		}
		return 0, false
	})
	s := openWith(t, f.url("p", "ssetype=aws:kms&kmskeyid=key-1"), nil)
	storagetestWrite(t, s, 1)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen["aws:kms key-1"] != 2 {
		t.Fatalf("PUTs carried the encryption headers %v; want aws:kms with key-1 on both", seen)
	}
}
