package file

import (
	"testing"
)

// FuzzDecodeStaged feeds decodeStaged what a commit may find as a file sink
// committable in checkpoint metadata. It must never panic, and what it
// accepts names a plain file of the staging directory (no separator, no
// "..", no hidden or '_' name that a reader of committed output would skip
// or a path that escapes the directory) and round trips through encode.
func FuzzDecodeStaged(f *testing.F) {
	f.Add(stagedFile{Dir: "/data/out", File: "part-0-job-0a1b2c3d-000001.jsonl", Size: 42, CRC: 7}.encode())
	f.Add([]byte("part-0-job-0a1b2c3d-000001.jsonl")) // an older committable
	f.Add([]byte(`{"file":"../x","size":1}`))
	f.Add([]byte(`{"file":"_manifest.json","size":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeStaged(data)
		if err != nil {
			return
		}
		for i := 0; i < len(s.File); i++ {
			if s.File[i] == '/' || s.File[i] == 0 {
				t.Fatalf("accepted file name %q", s.File)
			}
		}
		if s.File == "" || s.File == "." || s.File == ".." || s.File[0] == '.' {
			t.Fatalf("accepted file name %q", s.File)
		}
		if s.legacy {
			return
		}
		if s.File[0] == '_' || s.Size < 0 {
			t.Fatalf("accepted %+v", s)
		}
		back, err := decodeStaged(s.encode())
		if err != nil || back != s {
			t.Fatalf("round trip of %+v: %+v, %v", s, back, err)
		}
	})
}
