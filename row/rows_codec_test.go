package row_test

import (
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// A list of rows round-trips through RowsCodec, and every truncation or
// corruption of the bytes is an error, never a panic or a wrong list.
func TestRowsCodec(t *testing.T) {
	c := row.RowsCodec{Label: "topn.rows.v1[test]"}
	rows := []row.Row{
		{row.IntValue(1), row.StringValue("a"), row.Value{}},
		{row.IntValue(-7), row.StringValue(""), row.FloatValue(2.5)},
	}
	enc := c.Append(nil, rows)
	got, n, err := c.Decode(enc)
	if err != nil || n != len(enc) || len(got) != len(rows) || !slices.Equal(got[0], rows[0]) || !slices.Equal(got[1], rows[1]) {
		t.Fatalf("round trip: %v (%d of %d bytes, %v), want %v", got, n, len(enc), err, rows)
	}
	for i := range len(enc) {
		if _, _, err := c.Decode(enc[:i]); err == nil {
			t.Errorf("%d of %d bytes decoded without an error", i, len(enc))
		}
	}
	if _, _, err := c.Decode([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Error("a count larger than the bytes decoded without an error")
	}
}
