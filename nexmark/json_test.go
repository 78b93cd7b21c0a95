package nexmark_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/nexmark"
)

// checkJSONString checks that AppendJSONString(s) is valid JSON that
// decodes to what encoding/json makes of s (each byte of invalid UTF-8
// becomes U+FFFD).
func checkJSONString(t *testing.T, s string) {
	t.Helper()
	out := nexmark.AppendJSONString([]byte("x"), s)
	if out[0] != 'x' {
		t.Fatalf("AppendJSONString overwrote dst: %q", out)
	}
	out = out[1:]
	if !json.Valid(out) {
		t.Fatalf("AppendJSONString(%q) = %s is not valid JSON", s, out)
	}
	var got, want string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	ref, _ := json.Marshal(s)
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("AppendJSONString(%q) = %s decodes to %q, want %q", s, out, got, want)
	}
	if utf8.ValidString(s) && got != s {
		t.Fatalf("AppendJSONString(%q) does not round-trip: %q", s, got)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "a", `\`, `"`, `a\b"c`, "tab\there", "nl\n", "cr\r", "\b\f", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "héllo wörld ☃ 😀", "\u2028\u2029",
		"\xff", "a\xffb", "\xe2\x82", "\xed\xa0\x80", // invalid UTF-8: a stray byte, a cut sequence, a surrogate
		"exactly8", "sixteen bytes!!!", `12345678\`, "1234567\"89abcdef\\",
		"WN_HS_bnpkkiwhwana_L^`KZjdgsid`K]MLU[aaOH`ztxbulvlxtkn_ZZ^T\\mqgdjzvlkymsmfrhkfVYSXK_OY",
	} {
		checkJSONString(t, s)
	}
	// Every single byte, at every offset within an 8-byte block.
	for c := range 256 {
		for off := range 9 {
			b := make([]byte, 17)
			for i := range b {
				b[i] = 'a'
			}
			b[off] = byte(c)
			checkJSONString(t, string(b))
		}
	}
	if got := string(nexmark.AppendJSONString(nil, "a\\b\"\n\x01")); got != `"a\\b\"\n\u0001"` {
		t.Errorf("escapes: %s", got)
	}
}

// FuzzAppendJSONString holds AppendJSONString, which writes the strings of
// Nexmark events as JSON, to checkJSONString on arbitrary strings, invalid
// UTF-8 included.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", `\`, "a\"b", "\xff\xfe", "héllo", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkJSONString(t, s) })
}

// TestAppendJSONDecodes decodes generated events with encoding/json and
// compares every field, in the golden files' key order.
func TestAppendJSONDecodes(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Type         string `json:"type"`
		EventID      int64  `json:"event_id"`
		ID           int64  `json:"id"`
		Name         string `json:"name"`
		EmailAddress string `json:"email_address"`
		CreditCard   string `json:"credit_card"`
		City         string `json:"city"`
		State        string `json:"state"`
		ItemName     string `json:"item_name"`
		Description  string `json:"description"`
		InitialBid   int64  `json:"initial_bid"`
		Reserve      int64  `json:"reserve"`
		DateTime     int64  `json:"date_time"`
		Expires      int64  `json:"expires"`
		Seller       int64  `json:"seller"`
		Category     int64  `json:"category"`
		Auction      int64  `json:"auction"`
		Bidder       int64  `json:"bidder"`
		Price        int64  `json:"price"`
		Extra        string `json:"extra"`
	}
	for n := range int64(3000) {
		e := g.Event(n)
		var l line
		out := nexmark.AppendJSON(nil, e)
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("event %d: %v in %s", n, err, out)
		}
		var want line
		switch e.Type {
		case nexmark.PersonEvent:
			p := e.Person
			want = line{Type: "person", ID: p.ID, Name: p.Name, EmailAddress: p.EmailAddress, CreditCard: p.CreditCard,
				City: p.City, State: p.State, DateTime: p.DateTime, Extra: p.Extra}
		case nexmark.AuctionEvent:
			a := e.Auction
			want = line{Type: "auction", ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid,
				Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category, Extra: a.Extra}
		case nexmark.BidEvent:
			b := e.Bid
			want = line{Type: "bid", Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
		}
		want.EventID = n
		if l != want {
			t.Fatalf("event %d decodes to %+v, want %+v", n, l, want)
		}
		if e.Type.String() != l.Type {
			t.Fatalf("event %d: Type.String() = %q, JSON type %q", n, e.Type, l.Type)
		}
	}
}

// TestAppendJSONAllocations: encoding into a buffer with room allocates
// nothing.
func TestAppendJSONAllocations(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	events := []nexmark.Event{g.Event(0), g.Event(1), g.Event(4)}
	buf := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(100, func() {
		for _, e := range events {
			buf = nexmark.AppendJSON(buf[:0], e)
		}
	}); allocs != 0 {
		t.Errorf("AppendJSON allocated %v times per run, want 0", allocs)
	}
}
