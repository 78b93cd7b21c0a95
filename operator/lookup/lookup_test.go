package lookup

import (
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// A table groups its rows by key: a repeated key keeps every row in file
// order, a NULL key (in the table or looked up) matches nothing, and Rows
// counts every row read.
func TestTableMatch(t *testing.T) {
	rows := []row.Row{
		{row.IntValue(1), row.StringValue("a")},
		{row.Value{}, row.StringValue("no key")},
		{row.IntValue(1), row.StringValue("b")},
		{row.IntValue(2), row.StringValue("c")},
	}
	tab := NewTable(rows, 0)
	if tab.Rows() != 4 {
		t.Fatalf("Rows() = %d, want 4", tab.Rows())
	}
	if m := tab.Match(row.IntValue(1)); len(m) != 2 || m[0][1].Str() != "a" || m[1][1].Str() != "b" {
		t.Fatalf("Match(1) = %v, want the rows a and b", m)
	}
	if m := tab.Match(row.Value{}); m != nil {
		t.Fatalf("Match(NULL) = %v, want none", m)
	}
	if m := tab.Match(row.StringValue("1")); m != nil {
		t.Fatalf("Match('1') = %v: a string key matched an int", m)
	}
	if m := tab.Match(row.IntValue(3)); m != nil {
		t.Fatalf("Match(3) = %v, want none", m)
	}
}
