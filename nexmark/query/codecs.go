package query

import (
	"encoding/binary"
	"errors"

	"github.com/ingest-engine/ingest/state"
)

// errTruncated reports a state entry shorter than its encoding says.
var errTruncated = errors.New("truncated")

// appendString appends s with a varint length.
func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeString reads a string written by appendString.
func decodeString(src []byte) (string, int, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || uint64(len(src)-k) < n {
		return "", 0, errTruncated
	}
	return string(src[k : k+int(n)]), k + int(n), nil
}

// decodeVarints reads len(dst) varints.
func decodeVarints(src []byte, dst ...*int64) (int, error) {
	off := 0
	for _, d := range dst {
		v, k := binary.Varint(src[off:])
		if k <= 0 {
			return 0, errTruncated
		}
		*d, off = v, off+k
	}
	return off, nil
}

// q3AuctionCodec encodes a q3Auction as two varints.
type q3AuctionCodec struct{}

func (q3AuctionCodec) Name() string { return "nexmark.q3.auction/v1" }
func (q3AuctionCodec) Append(dst []byte, a q3Auction) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, a.ID), a.Seller)
}
func (q3AuctionCodec) Decode(src []byte) (q3Auction, int, error) {
	var a q3Auction
	n, err := decodeVarints(src, &a.ID, &a.Seller)
	return a, n, err
}

// q3PersonCodec encodes a q3Person as its id and three strings.
type q3PersonCodec struct{}

func (q3PersonCodec) Name() string { return "nexmark.q3.person/v1" }
func (q3PersonCodec) Append(dst []byte, p q3Person) []byte {
	dst = binary.AppendVarint(dst, p.ID)
	return appendString(appendString(appendString(dst, p.Name), p.City), p.State)
}
func (q3PersonCodec) Decode(src []byte) (q3Person, int, error) {
	var p q3Person
	off, err := decodeVarints(src, &p.ID)
	if err != nil {
		return p, 0, err
	}
	for _, s := range []*string{&p.Name, &p.City, &p.State} {
		v, k, err := decodeString(src[off:])
		if err != nil {
			return p, 0, err
		}
		*s, off = v, off+k
	}
	return p, off, nil
}

// q8PersonCodec encodes a q8Person as its id and name.
type q8PersonCodec struct{}

func (q8PersonCodec) Name() string { return "nexmark.q8.person/v1" }
func (q8PersonCodec) Append(dst []byte, p q8Person) []byte {
	return appendString(binary.AppendVarint(dst, p.ID), p.Name)
}
func (q8PersonCodec) Decode(src []byte) (q8Person, int, error) {
	var p q8Person
	off, err := decodeVarints(src, &p.ID)
	if err != nil {
		return p, 0, err
	}
	name, k, err := decodeString(src[off:])
	p.Name = name
	return p, off + k, err
}

var (
	_ state.Codec[q3Auction] = q3AuctionCodec{}
	_ state.Codec[q3Person]  = q3PersonCodec{}
	_ state.Codec[q8Person]  = q8PersonCodec{}
)

// auctionInfoCodec encodes q4's auctionInfo as three varints.
type auctionInfoCodec struct{}

func (auctionInfoCodec) Name() string { return "nexmark.q4.auction/v1" }
func (auctionInfoCodec) Append(dst []byte, a auctionInfo) []byte {
	return binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(dst, a.DateTime), a.Expires), a.Category)
}
func (auctionInfoCodec) Decode(src []byte) (auctionInfo, int, error) {
	var a auctionInfo
	n, err := decodeVarints(src, &a.DateTime, &a.Expires, &a.Category)
	return a, n, err
}

// auctionOrBidCodec encodes q4's early bids (and auctions) as a flag and
// five varints.
type auctionOrBidCodec struct{}

func (auctionOrBidCodec) Name() string { return "nexmark.q4.auction-or-bid/v1" }
func (auctionOrBidCodec) Append(dst []byte, v auctionOrBid) []byte {
	flag := byte(0)
	if v.IsAuction {
		flag = 1
	}
	dst = append(dst, flag)
	for _, x := range []int64{v.Auction, v.DateTime, v.Expires, v.Category, v.Price} {
		dst = binary.AppendVarint(dst, x)
	}
	return dst
}
func (auctionOrBidCodec) Decode(src []byte) (auctionOrBid, int, error) {
	var v auctionOrBid
	if len(src) == 0 || src[0] > 1 {
		return v, 0, errTruncated
	}
	v.IsAuction = src[0] == 1
	n, err := decodeVarints(src[1:], &v.Auction, &v.DateTime, &v.Expires, &v.Category, &v.Price)
	return v, n + 1, err
}

// avgAccCodec encodes q4's running sum and count.
type avgAccCodec struct{}

func (avgAccCodec) Name() string { return "nexmark.q4.average/v1" }
func (avgAccCodec) Append(dst []byte, a avgAcc) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, a.Sum), a.Count)
}
func (avgAccCodec) Decode(src []byte) (avgAcc, int, error) {
	var a avgAcc
	n, err := decodeVarints(src, &a.Sum, &a.Count)
	return a, n, err
}
