package eventtime_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/row"
)

func TestJSON(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{`"2026-01-01T00:00:00Z"`, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()},
		{`"2026-01-01T01:00:00.123456789+01:00"`, time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC).UnixNano()},
		{`"2026-01-01T00:00:00\u005a"`, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()},
		{`1767225600000`, 1767225600000 * ms},
		{` 1767225600000 `, 1767225600000 * ms},
		{`-1500`, -1500 * ms},
		{`1.5`, 1500000},
		{`1e3`, 1000 * ms},
		{`0`, 0},
		{`1700000000000.123456`, 1700000000000123456},
		{`1700000000000.1234560`, 1700000000000123456},
		{`1.7000000000001234e12`, 1700000000000123400},
		{`-0.000001`, -1},
	} {
		got, err := eventtime.JSON([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("JSON(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for in, msg := range map[string]string{
		``:                        "empty",
		`null`:                    "null",
		`true`:                    "neither",
		`"yesterday"`:             "not RFC 3339",
		`"2026-01-01"`:            "not RFC 3339",
		`{}`:                      "neither",
		`"2026-01-01T00:00:00Z`:   "time",
		`"`:                       "time",
		`9223372036854776`:        "outside the years",
		`1e300`:                   "outside the years",
		`"3000-01-01T00:00:00Z"`:  "outside the years",
		`1.0000001`:               "fractional digits",
		`1e-7`:                    "fractional digits",
		`01`:                      "neither",
		`+1`:                      "neither",
		`1.`:                      "neither",
		`0x10`:                    "neither",
		`Infinity`:                "neither",
		`"1767225600000"`:         "not RFC 3339",
		`1e99999999999999999999`:  "outside the years",
		`1e-99999999999999999999`: "fractional digits",
	} {
		if got, err := eventtime.JSON([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("JSON(%s) = %d, %v; want an error containing %q", in, got, err, msg)
		}
	}
}

func TestEpochMillis(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1767225600000", 1_767_225_600_000_000_000},
		{"+1767225600000.25", 1_767_225_600_000_250_000},
		{"-1.5", -1_500_000},
		{"0", 0},
		{"007", 7_000_000},
		{"1.1234560000", 1_123_456},
		{"9223372036854.775807", math.MaxInt64},
		{"-9223372036854.775808", math.MinInt64},
	} {
		got, err := eventtime.EpochMillis([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("EpochMillis(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for in, msg := range map[string]string{
		"":                      "not epoch milliseconds",
		"-":                     "not epoch milliseconds",
		"+":                     "not epoch milliseconds",
		"+-5":                   "not epoch milliseconds",
		"1e3":                   "not epoch milliseconds",
		"1.":                    "not epoch milliseconds",
		".5":                    "not epoch milliseconds",
		"1.2.3":                 "not epoch milliseconds",
		" 1":                    "not epoch milliseconds",
		"1.1234567":             "fractional digits",
		"9223372036854.775808":  "outside the years",
		"99999999999999999":     "outside the years",
		"-9223372036854.775809": "outside the years",
	} {
		if got, err := eventtime.EpochMillis([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("EpochMillis(%q) = %d, %v; want an error containing %q", in, got, err, msg)
		}
	}
}

func TestRFC3339RangeIsErrRange(t *testing.T) {
	for _, in := range []string{"3000-01-01T00:00:00Z", "1600-01-01T00:00:00Z"} {
		if _, err := eventtime.RFC3339([]byte(in)); !errors.Is(err, eventtime.ErrRange) {
			t.Errorf("RFC3339(%s): %v, want ErrRange", in, err)
		}
	}
	if _, err := eventtime.RFC3339([]byte("noon")); err == nil || errors.Is(err, eventtime.ErrRange) {
		t.Errorf("RFC3339(noon): %v, want a parse error that is not ErrRange", err)
	}
}

// Every source reads one event time to the same instant, or refuses it:
// the NATS and Kafka sources' JSON fields, the file source's epoch_ms and
// rfc3339 formats, and the JSON row decoder's time columns. (Before one
// package parsed them, 1700000000000.123456 became …123648 through NATS, a
// float64, and a seventh fractional digit was refused, truncated or
// rounded depending on the source.)
func TestSourcesAgree(t *testing.T) {
	ts := &row.Schema{Fields: []row.Field{{Name: "ts", Kind: row.Time}}}
	dec := row.NewJSONDecoder(ts, row.JSONOptions{})
	kafkaTime := kafka.JSONEventTime("ts")
	for _, tc := range []struct {
		text   string // as a text field, and as a JSON number or string
		format file.TimeFormat
		want   int64 // 0 with ok false: every source refuses it
		ok     bool
	}{
		{"1700000000000.123456", file.TimeEpochMillis, 1700000000000123456, true},
		{"1700000000000.1234560", file.TimeEpochMillis, 1700000000000123456, true},
		{"1700000000000.1234567", file.TimeEpochMillis, 0, false},
		{"1700000000000.1234565", file.TimeEpochMillis, 0, false},
		{"-1.5", file.TimeEpochMillis, -1_500_000, true},
		{"9223372036855", file.TimeEpochMillis, 0, false},
		{"2023-11-14T22:13:20.123456789Z", file.TimeRFC3339, 1700000000123456789, true},
		{"2023-11-14T23:13:20.1234567891+01:00", file.TimeRFC3339, 1700000000123456789, true},
		{"2262-04-12T00:00:00Z", file.TimeRFC3339, 0, false},
	} {
		raw := tc.text
		if tc.format == file.TimeRFC3339 {
			raw = strconv.Quote(tc.text)
		}
		check := func(source string, got int64, err error) {
			t.Helper()
			if tc.ok && (err != nil || got != tc.want) {
				t.Errorf("%s read %s as %d, %v; want %d", source, tc.text, got, err, tc.want)
			}
			if !tc.ok && err == nil {
				t.Errorf("%s read %s as %d; want an error", source, tc.text, got)
			}
		}
		got, err := file.ParseEventTime(tc.text, tc.format)
		check("the file source", got, err)
		got, err = nats.FieldTime([]byte(`{"ts":`+raw+`}`), "ts")
		check("the NATS source", got, err)
		got, err = kafkaTime(kafka.Message{Value: []byte(`{"ts":` + raw + `}`)})
		check("the Kafka source", got, err)
		r, err := dec.Decode([]byte(`{"ts":` + raw + `}`))
		if err == nil {
			got, err = dec.EventTime(r, 0)
		}
		check("the JSON row decoder", got, err)
	}
}

// FuzzJSON checks eventtime.JSON against time.Parse for strings and
// against exact rational arithmetic (math/big) for numbers: the result is
// the number of milliseconds times 10^6 when that is an integer in int64,
// and an error otherwise.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`1`, `-1.5`, `1e3`, `1.0000001`, `"2026-01-01T00:00:00Z"`, `9223372036854.775807`, `1E-6`, `0.0000000e5`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ns, err := eventtime.JSON(raw)
		if !json.Valid(raw) {
			if err == nil {
				t.Fatalf("JSON(%q) = %d from invalid JSON", raw, ns)
			}
			return
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			pt, perr := time.Parse(time.RFC3339Nano, s)
			inRange := perr == nil && !pt.Before(time.Unix(0, math.MinInt64)) && !pt.After(time.Unix(0, math.MaxInt64))
			if inRange != (err == nil) || (inRange && pt.UnixNano() != ns) {
				t.Fatalf("JSON(%s) = %d, %v; time.Parse: %v, %v", raw, ns, err, pt, perr)
			}
			return
		}
		trimmed := bytes.Trim(raw, " \t\r\n")
		if len(trimmed) == 0 || (trimmed[0] != '-' && (trimmed[0] < '0' || trimmed[0] > '9')) {
			if err == nil {
				t.Fatalf("JSON(%s) = %d from a JSON value that is neither a string nor a number", raw, ns)
			}
			return
		}
		if len(trimmed) > 200 {
			return // big.Rat would take long on huge exponents
		}
		want, ok := exactNanos(string(trimmed))
		if ok != (err == nil) || (ok && ns != want) {
			t.Fatalf("JSON(%s) = %d, %v; exact arithmetic: %d, %v", raw, ns, err, want, ok)
		}
	})
}

// exactNanos returns ms × 10^6 for the decimal number ms when that is an
// integer in int64.
func exactNanos(ms string) (int64, bool) {
	mant, exp, _ := strings.Cut(strings.ToLower(ms), "e")
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(exp)
		if err != nil || n > 100 || n < -100 {
			// Far outside int64 nanoseconds either way, unless zero.
			r, ok := new(big.Rat).SetString(mant)
			if !ok {
				panic(fmt.Sprintf("mantissa %q", mant))
			}
			return 0, r.Sign() == 0
		}
		e = n
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		panic(fmt.Sprintf("mantissa %q", mant))
	}
	scale := new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e+6))), nil), big.NewInt(1))
	if e+6 >= 0 {
		r.Mul(r, scale)
	} else {
		r.Quo(r, scale)
	}
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
