package blob

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The AWS shared configuration files, read as the AWS SDK reads them: the credentials file
// (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) with sections [NAME], and the config file
// (AWS_CONFIG_FILE, else ~/.aws/config) with sections [profile NAME] and [default]. This package
// reads them only to decide which credentials to use and which region; minio-go's
// FileAWSCredentials reads the credentials themselves.

// profileName returns the profile an s3 URL uses: its profile parameter, else AWS_PROFILE, else
// "default".
func profileName(param string) string {
	if param != "" {
		return param
	}
	if p := os.Getenv("AWS_PROFILE"); p != "" {
		return p
	}
	return "default"
}

// sharedFiles returns the paths of the credentials file and the config file.
func sharedFiles() (creds, config string) {
	creds, config = os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), os.Getenv("AWS_CONFIG_FILE")
	if home, err := os.UserHomeDir(); err == nil {
		if creds == "" {
			creds = filepath.Join(home, ".aws", "credentials")
		}
		if config == "" {
			config = filepath.Join(home, ".aws", "config")
		}
	}
	return creds, config
}

// loadProfile returns the settings of the profile param names (see profileName), the config
// file's under the credentials file's, and whether either file has a section for it.
func loadProfile(param string) (map[string]string, bool, error) {
	name := profileName(param)
	credsFile, configFile := sharedFiles()
	configSections := []string{"profile " + name}
	if name == "default" {
		configSections = append(configSections, "default")
	}
	merged := map[string]string{}
	found := false
	for _, f := range []struct {
		path     string
		sections []string
	}{
		{configFile, configSections},
		{credsFile, []string{name}},
	} {
		if f.path == "" {
			continue
		}
		sections, err := readINI(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("AWS shared configuration: %w", err)
		}
		for _, s := range f.sections {
			if kv, ok := sections[s]; ok {
				found = true
				for k, v := range kv {
					merged[k] = v
				}
			}
		}
	}
	return merged, found, nil
}

// profileHasCredentials reports whether the profile param names (see profileName) provides
// credentials that minio-go's FileAWSCredentials can use: static keys, SSO or credential_process.
// A profile named explicitly (the parameter or AWS_PROFILE) must exist, and one that assumes a
// role (role_arn) is refused: this package does not follow role chains in profiles.
func profileHasCredentials(param string) (bool, error) {
	settings, found, err := loadProfile(param)
	if err != nil {
		return false, err
	}
	name := profileName(param)
	if !found {
		if param != "" || os.Getenv("AWS_PROFILE") != "" {
			creds, config := sharedFiles()
			return false, fmt.Errorf("AWS profile %q is not defined in %s or %s", name, creds, config)
		}
		return false, nil
	}
	for _, k := range []string{"aws_access_key_id", "aws_secret_access_key", "sso_role_name", "sso_session", "sso_start_url", "credential_process"} {
		if settings[k] != "" {
			return true, nil
		}
	}
	if settings["role_arn"] != "" {
		return false, fmt.Errorf("AWS profile %q assumes role %s (role_arn), which checkpoint URLs do not follow: "+
			"give the role as the parameter role=ARN and the credentials to assume it with another way "+
			"(profile=SOURCE_PROFILE, the environment, or instance_metadata=true)", name, settings["role_arn"])
	}
	return false, nil
}

// profileRegion returns the region of the profile param names, or "".
func profileRegion(param string) string {
	settings, _, err := loadProfile(param)
	if err != nil {
		return ""
	}
	return settings["region"]
}

// readINI reads an AWS-style INI file: sections of key = value lines; '#' and ';' start comments;
// indented lines (nested settings such as s3 = …) are skipped. Keys are lowercased.
func readINI(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sections := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && strings.HasSuffix(line, "]"):
			name := strings.Join(strings.Fields(line[1:len(line)-1]), " ")
			if sections[name] == nil {
				sections[name] = map[string]string{}
			}
			cur = sections[name]
		case raw[0] == ' ' || raw[0] == '\t':
		case cur != nil:
			if k, v, ok := strings.Cut(line, "="); ok {
				cur[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return sections, nil
}
