package kafka

import "github.com/ingest-engine/ingest/internal/jsonscan"

// srcJSONField returns the raw value of key in the JSON object data without
// decoding it (see jsonscan.Member).
var srcJSONField = jsonscan.Member
