package nexmark_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// urlBid is a bid as other Nexmark generators make them (Flink's and
// RisingWave's), with a channel and a url, which Beam's have not.
type urlBid struct {
	Auction  int64   `json:"auction"`
	Bidder   int64   `json:"bidder"`
	Price    int64   `json:"price"`
	Channel  *string `json:"channel"`
	URL      *string `json:"url"`
	DateTime string  `json:"date_time"`
	Extra    string  `json:"extra"`
}

// urlBids are n bids with channels in mixed case, unknown channels, no
// channel, and urls with and without a channel_id (empty, first, after
// another parameter), fewer than three directories, or none.
func urlBids(n int) []urlBid {
	rng := rand.New(rand.NewPCG(21, 22))
	channels := []string{"Apple", "google", "FaceBook", "Baidu", "Bing", "apple "}
	var out []urlBid
	for i := range n {
		b := urlBid{Auction: 1000 + int64(rng.IntN(50)), Bidder: int64(rng.IntN(1000)), Price: int64(rng.IntN(100000)),
			DateTime: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339), Extra: "x"}
		if c := rng.IntN(len(channels) + 1); c < len(channels) {
			b.Channel = &channels[c]
		}
		var u string
		switch rng.IntN(7) {
		case 0:
			u = fmt.Sprintf("https://www.nexmark.com/%s/item.htm?query=1&channel_id=%d", "d"+fmt.Sprint(rng.IntN(9)), rng.IntN(3000))
		case 1:
			u = fmt.Sprintf("https://www.nexmark.com/a/b/c/d/item.htm?channel_id=%d&query=1", rng.IntN(3000))
		case 2:
			u = "https://www.nexmark.com/a/b/item.htm?channel_id=&query=1"
		case 3:
			u = "channel_id=7"
		case 4:
			u = "https://www.nexmark.com/item.htm?query=1&xchannel_id=5"
		case 5:
			u = "https://www.nexmark.com"
		}
		if u != "" {
			b.URL = &u
		}
		out = append(out, b)
	}
	return out
}

// q21 and q22 over bids that have channels and urls: the committed rows are
// those a direct computation gives (q21's channel ids from the known
// channels or the url's channel_id parameter; q22's first three url
// directories, empty past the url's end, NULL without a url).
func TestSQLQ21AndQ22OverURLs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	bids := urlBids(2000)
	dir := t.TempDir()
	var in strings.Builder
	for _, b := range bids {
		line, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "bids.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The query files as they are, but reading the file of bids.
	source := regexp.MustCompile(`(?s)CREATE SOURCE bid \(.*?\n\);`)
	fileSource := `CREATE SOURCE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'file', path = 'bids.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;`
	run := func(name string) []string {
		text, err := os.ReadFile(name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		if !source.Match(text) {
			t.Fatalf("%s.sql has no CREATE SOURCE bid to replace", name)
		}
		path := filepath.Join(dir, name+".sql")
		if err := os.WriteFile(path, source.ReplaceAll(text, []byte(fileSource)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range committed(t, filepath.Join(dir, "data", name)) {
			got = append(got, canonical(t, r))
		}
		slices.Sort(got)
		return got
	}
	known := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
	param := regexp.MustCompile(`(&|^)channel_id=([^&]*)`)
	var q21, q22 []map[string]any
	for _, b := range bids {
		var id any
		if b.Channel != nil {
			if v, ok := known[strings.ToLower(*b.Channel)]; ok {
				id = v
			}
		}
		if id == nil && b.URL != nil {
			if m := param.FindStringSubmatch(*b.URL); m != nil {
				id = m[2]
			}
		}
		if id != nil {
			q21 = append(q21, map[string]any{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "channel": b.Channel, "channel_id": id})
		}
		dirs := [3]any{}
		if b.URL != nil {
			parts := strings.Split(*b.URL, "/")
			for i := range dirs {
				dirs[i] = ""
				if 3+i < len(parts) {
					dirs[i] = parts[3+i]
				}
			}
		}
		q22 = append(q22, map[string]any{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "channel": b.Channel,
			"dir1": dirs[0], "dir2": dirs[1], "dir3": dirs[2]})
	}
	for _, c := range []struct {
		name string
		want []map[string]any
	}{{"q21", q21}, {"q22", q22}} {
		got, want := run(c.name), reference(t, c.want)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s gave %d rows, the direct computation %d; first %s, want %s", c.name, len(got), len(want), first(got), first(want))
		}
		t.Logf("%s: %d rows alike", c.name, len(got))
	}
}
