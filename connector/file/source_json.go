package file

import "github.com/ingest-engine/ingest/internal/jsonscan"

// jsonMember returns the raw value of the top-level member name of the JSON
// object in data (the last one, as encoding/json would take, when the name
// repeats), without decoding the object. Malformed input gives false:
// decoding the line itself is what reports it.
func jsonMember(data []byte, name string) (raw []byte, found bool) {
	raw, found, err := jsonscan.Member(data, name)
	return raw, found && err == nil
}
