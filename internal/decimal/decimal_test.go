package decimal_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/ingest-engine/ingest/internal/decimal"
)

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		lex   string
		scale int
		want  int64
		st    decimal.Status
	}{
		{"0", 0, 0, decimal.OK},
		{"-0", 6, 0, decimal.OK},
		{"0.000", 0, 0, decimal.OK},
		{"0e999999999", 0, 0, decimal.OK},
		{"12", 0, 12, decimal.OK},
		{"1.5", 0, 0, decimal.Fraction},
		{"1.5", 1, 15, decimal.OK},
		{"1.50", 1, 15, decimal.OK},
		{"1.5e1", 0, 15, decimal.OK},
		{"150e-2", 1, 15, decimal.OK},
		{"1e-7", 6, 0, decimal.Fraction},
		{"9007199254740993.0", 0, 9007199254740993, decimal.OK},
		{"9223372036854775807", 0, math.MaxInt64, decimal.OK},
		{"9223372036854775808", 0, 0, decimal.Range},
		{"-9223372036854775808", 0, math.MinInt64, decimal.OK},
		{"-9223372036854775809", 0, 0, decimal.Range},
		{"9223372036854.775807", 6, math.MaxInt64, decimal.OK},
		{"1e19", 0, 0, decimal.Range},
		{"1e18", 0, 1e18, decimal.OK},
		{"1e99999999999999999999", 0, 0, decimal.Range},
		{"1700000000000.123456", 6, 1700000000000123456, decimal.OK},
		{"1700000000000.1234567", 6, 0, decimal.Fraction},
	} {
		got, st := decimal.Int([]byte(tc.lex), tc.scale)
		if st != tc.st || (st == decimal.OK && got != tc.want) {
			t.Errorf("Int(%s, %d) = %d, %d; want %d, %d", tc.lex, tc.scale, got, st, tc.want, tc.st)
		}
	}
}

// Valid accepts exactly the numbers encoding/json does.
func TestValid(t *testing.T) {
	for _, lex := range []string{
		"0", "-0", "1", "-1", "10", "1.5", "0.5", "1e3", "1E+3", "1e-3", "-1.5e-3", "123456789012345678901234567890",
		"", "-", "+1", "01", "-01", "1.", ".5", "1e", "1e+", "1.e3", "0x10", "1_000", "Infinity", "NaN", " 1", "1 ", "--1", "1.5.5",
	} {
		if got, want := decimal.Valid([]byte(lex)), json.Valid([]byte(lex)) && lex != "" && lex[0] != ' ' && lex[len(lex)-1] != ' '; got != want {
			t.Errorf("Valid(%q) = %v, want %v", lex, got, want)
		}
	}
}
