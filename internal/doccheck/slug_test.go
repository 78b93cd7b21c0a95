package doccheck

import "testing"

// TestHeadingSlugs checks headings against the anchors GitHub gives them:
// the anchors this repository's docs already link to, and the cases where a
// naive slug goes wrong (code spans, punctuation, emphasis, Unicode).
func TestHeadingSlugs(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Bad input: on_error and dead letters", "bad-input-on_error-and-dead-letters"},
		{"Delivery guarantee: checkpoint.require", "delivery-guarantee-checkpointrequire"},
		{"Issue #12's checks on the hot path (A/B, 2026-12-02)", "issue-12s-checks-on-the-hot-path-ab-2026-12-02"},
		{"`ingest run` flags", "ingest-run-flags"},
		{"The `_ledger` and `chk-<N>/_metadata`", "the-_ledger-and-chk-n_metadata"},
		{"`` a ` b ``", "a--b"},
		{"A & B", "a--b"},
		{"C++ / Go", "c--go"},
		{"Ingest — exact recovery", "ingest--exact-recovery"},
		{"Über café", "über-café"},
		{"Emoji 🚀 launch", "emoji--launch"},
		{"1. Numbered, twice", "1-numbered-twice"},
		{"_emphasis_ and **bold** and snake_case_name", "emphasis-and-bold-and-snake_case_name"},
		{`Escaped \_under\_ and \#hash`, "escaped-_under_-and-hash"},
		{"[Linked text](other.md#x) and ![an image](i.png) after", "linked-text-and--after"},
		{"[`code` in a link](x.md)", "code-in-a-link"},
		{"Tags<br> and &amp; entities", "tags-and--entities"},
		{"Trailing spaces   ", "trailing-spaces"},
		{"UPPER lower", "upper-lower"},
		{"Known limits (now)", "known-limits-now"},
	} {
		if got := Slug(HeadingText(tc.heading)); got != tc.want {
			t.Errorf("heading %q: slug %q, want %q (text %q)", tc.heading, got, tc.want, HeadingText(tc.heading))
		}
	}
}

// TestSluggerDuplicates checks github-slugger's numbering of repeated
// headings: the second "Intro" is intro-1, and a heading whose own slug is
// a number already handed out goes one further.
func TestSluggerDuplicates(t *testing.T) {
	var s Slugger
	for i, tc := range []struct{ heading, want string }{
		{"Intro", "intro"},
		{"Intro", "intro-1"},
		{"intro", "intro-2"},
		{"Intro-1", "intro-1-1"},
		{"Intro 1", "intro-1-2"},
		{"Intro", "intro-3"},
		{"Other", "other"},
		{"Intro!", "intro-4"},
	} {
		if got := s.Slug(HeadingText(tc.heading)); got != tc.want {
			t.Errorf("heading %d %q: slug %q, want %q", i, tc.heading, got, tc.want)
		}
	}
	var fresh Slugger
	if got := fresh.Slug("Intro"); got != "intro" {
		t.Errorf("a new Slugger gave %q for the first Intro, want intro", got)
	}
}
