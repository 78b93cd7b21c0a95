package query

import (
	"testing"

	"github.com/ingest-engine/ingest/state"
)

func roundTrip[T comparable](t *testing.T, c state.Codec[T], v T) {
	t.Helper()
	b := c.Append([]byte{0xAA}, v)
	got, n, err := c.Decode(b[1:])
	if err != nil || n != len(b)-1 || got != v {
		t.Fatalf("%s: decoded %+v (%d bytes, %v), want %+v (%d bytes)", c.Name(), got, n, err, v, len(b)-1)
	}
	for cut := 0; cut < len(b)-1; cut++ {
		if _, _, err := c.Decode(b[1 : 1+cut]); err == nil {
			t.Fatalf("%s: decoding %d of %d bytes did not fail", c.Name(), cut, len(b)-1)
		}
	}
}

func TestCodecs(t *testing.T) {
	roundTrip[q3Auction](t, q3AuctionCodec{}, q3Auction{ID: 1 << 40, Seller: -3})
	roundTrip[q3Person](t, q3PersonCodec{}, q3Person{ID: 1001, Name: "Peter Jones", City: "Portland", State: "OR"})
	roundTrip[q8Person](t, q8PersonCodec{}, q8Person{ID: 7, Name: `a\b`})
	roundTrip[auctionInfo](t, auctionInfoCodec{}, auctionInfo{DateTime: 1436918400000, Expires: 1436918400001, Category: 14})
	roundTrip[auctionOrBid](t, auctionOrBidCodec{}, auctionOrBid{IsAuction: true, Auction: 1000, DateTime: 5, Expires: 9, Category: 10})
	roundTrip[auctionOrBid](t, auctionOrBidCodec{}, auctionOrBid{Auction: 1000, DateTime: 5, Price: 32530001})
	roundTrip[avgAcc](t, avgAccCodec{}, avgAcc{Sum: 1 << 50, Count: 3})
}
