package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// The serialized ledger metadata value (BookKeeper's LedgerMetadataSerDe,
// spec/metadata.md §1.2), the same on every backend:
//
//	+------------------------------+----+---------+----+-------------------+
//	| "BookieMetadataFormatVersion"| \t | version | \n | body              |
//	+------------------------------+----+---------+----+-------------------+
//	  27 ASCII bytes                      decimal,
//	                                      ≤ 10 digits
//
// Format 3 (written by Folio and by Java since 4.9): the body is a varint32
// length, then that many bytes of a binary LedgerMetadataFormat; bytes after
// it are ignored. Format 2: the body is the protobuf text format of
// LedgerMetadataFormat. Format 1: lines of text (parseV1). Other versions
// are refused.

const metadataHeaderPrefix = "BookieMetadataFormatVersion\t"

// CurrentMetadataFormat is the format Folio writes.
const CurrentMetadataFormat = 3

// SerializeLedgerMetadata returns md in format 3. It first checks what a
// writer must guarantee (Validate, plus password and digest present);
// failures wrap ErrInvalidMetadata. Fields 1–9 and 12 are always written
// (and 10 when StoreCtime), in field-number order as Java writes them;
// custom metadata is written sorted by key, so the output is deterministic.
func SerializeLedgerMetadata(md *LedgerMetadata) ([]byte, error) {
	if err := md.validateForWrite(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMetadata, err)
	}
	lastEntryID, length := int64(-1), int64(0)
	if md.State == LedgerClosed {
		lastEntryID, length = md.LastEntryID, md.Length
	}
	f := &formatpb.LedgerMetadataFormat{
		QuorumSize:    proto.Int32(int32(md.WriteQuorum)),
		EnsembleSize:  proto.Int32(int32(md.EnsembleSize)),
		Length:        proto.Int64(length),
		LastEntryId:   proto.Int64(lastEntryID),
		State:         formatpb.LedgerMetadataFormat_State(md.State).Enum(),
		DigestType:    formatpb.LedgerMetadataFormat_DigestType(md.DigestType).Enum(),
		Password:      append([]byte{}, md.Password...), // non-nil: present even when empty
		AckQuorumSize: proto.Int32(int32(md.AckQuorum)),
		CToken:        proto.Int64(md.CToken),
	}
	for _, s := range md.Ensembles {
		seg := &formatpb.LedgerMetadataFormat_Segment{FirstEntryId: proto.Int64(s.FirstEntryID)}
		for _, b := range s.Ensemble {
			seg.EnsembleMember = append(seg.EnsembleMember, string(b))
		}
		f.Segment = append(f.Segment, seg)
	}
	if md.StoreCtime {
		f.Ctime = proto.Int64(md.Ctime)
	}
	for _, k := range slices.Sorted(maps.Keys(md.CustomMetadata)) {
		f.CustomMetadata = append(f.CustomMetadata, &formatpb.LedgerMetadataFormatCMetadataMapEntry{
			Key: proto.String(k), Value: append([]byte{}, md.CustomMetadata[k]...),
		})
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMetadata, err)
	}
	out := make([]byte, 0, len(metadataHeaderPrefix)+3+protowire.SizeVarint(uint64(len(body)))+len(body))
	out = append(out, metadataHeaderPrefix...)
	out = append(out, '3', '\n')
	out = protowire.AppendVarint(out, uint64(len(body)))
	return append(out, body...), nil
}

// ParseLedgerMetadata parses a stored value of format 1, 2 or 3 and
// validates it as Java does. Errors wrap ErrCorruptMetadata and say what is
// wrong; drivers wrap them further with the key (Corrupt). The result does
// not alias b.
func ParseLedgerMetadata(b []byte) (*LedgerMetadata, error) {
	md, err := parseLedgerMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("%w: ledger metadata: %v", ErrCorruptMetadata, err)
	}
	return md, nil
}

func parseLedgerMetadata(b []byte) (*LedgerMetadata, error) {
	version, body, err := parseHeader(b)
	if err != nil {
		return nil, err
	}
	var md *LedgerMetadata
	switch version {
	case 3:
		n, l := protowire.ConsumeVarint(body)
		if l < 0 {
			return nil, errors.New("format 3: bad length prefix")
		}
		if n > uint64(len(body)-l) {
			return nil, fmt.Errorf("format 3: truncated: length prefix %d, %d bytes follow", n, len(body)-l)
		}
		f := &formatpb.LedgerMetadataFormat{}
		if err := proto.Unmarshal(body[l:l+int(n)], f); err != nil {
			return nil, fmt.Errorf("format 3: %v", err)
		}
		md, err = fromFormat(f)
	case 2:
		f := &formatpb.LedgerMetadataFormat{}
		if err := prototext.Unmarshal(body, f); err != nil {
			return nil, fmt.Errorf("format 2: %v", err)
		}
		md, err = fromFormat(f)
	case 1:
		md, err = parseV1(body)
	default:
		return nil, fmt.Errorf("unsupported format version %d (this build reads 1, 2 and 3)", version)
	}
	if err != nil {
		return nil, err
	}
	md.FormatVersion = version
	if err := md.Validate(); err != nil {
		return nil, err
	}
	return md, nil
}

// parseHeader returns the format version and the bytes after the header.
func parseHeader(b []byte) (int, []byte, error) {
	if !bytes.HasPrefix(b, []byte(metadataHeaderPrefix)) {
		if len(b) == 0 {
			return 0, nil, errors.New("empty value")
		}
		return 0, nil, errors.New("header corrupt: no BookieMetadataFormatVersion line")
	}
	rest := b[len(metadataHeaderPrefix):]
	i := bytes.IndexByte(rest, '\n')
	if i < 1 || i > 10 {
		return 0, nil, errors.New("header corrupt: bad version line")
	}
	v, err := strconv.ParseInt(string(rest[:i]), 10, 32)
	if err != nil || v < 0 {
		return 0, nil, fmt.Errorf("header corrupt: version %q", rest[:i])
	}
	return int(v), rest[i+1:], nil
}

// fromFormat converts a parsed format 2/3 message, reading absent optional
// fields as Java does (spec §1.5). Required fields were checked by the proto
// decoder.
func fromFormat(f *formatpb.LedgerMetadataFormat) (*LedgerMetadata, error) {
	md := &LedgerMetadata{
		EnsembleSize: int(f.GetEnsembleSize()),
		WriteQuorum:  int(f.GetQuorumSize()),
		AckQuorum:    int(f.GetQuorumSize()),
		State:        LedgerState(f.GetState()),
		LastEntryID:  -1,
		Ctime:        -1,
		CToken:       f.GetCToken(),
	}
	if f.AckQuorumSize != nil {
		md.AckQuorum = int(f.GetAckQuorumSize())
	}
	if md.State == LedgerClosed {
		// Java does not require field 4: a CLOSED value without it reads
		// as lastEntryId 0, and so does Folio.
		md.LastEntryID, md.Length = f.GetLastEntryId(), f.GetLength()
	}
	if f.Password != nil {
		md.HasPassword = true
		md.Password = bytes.Clone(f.Password)
		md.DigestType = DigestCRC32
		if f.DigestType != nil {
			md.DigestType = DigestType(f.GetDigestType())
		}
	}
	if f.Ctime != nil {
		md.Ctime, md.StoreCtime = f.GetCtime(), true
	}
	for _, e := range f.CustomMetadata {
		if md.CustomMetadata == nil {
			md.CustomMetadata = map[string][]byte{}
		}
		if _, dup := md.CustomMetadata[e.GetKey()]; dup {
			return nil, fmt.Errorf("duplicate custom metadata key %q", e.GetKey())
		}
		md.CustomMetadata[e.GetKey()] = bytes.Clone(e.GetValue())
	}
	for _, s := range f.Segment {
		seg := Segment{FirstEntryID: s.GetFirstEntryId()}
		for _, b := range s.EnsembleMember {
			seg.Ensemble = append(seg.Ensemble, BookieID(b))
		}
		md.Ensembles = append(md.Ensembles, seg)
	}
	return md, nil
}

// v1RecoveryMarker in place of lastEntryId on the CLOSED line of format 1
// means IN_RECOVERY.
const v1RecoveryMarker = -102

// parseV1 reads format 1 (BookKeeper 4.0), lines after the header:
//
//	<write quorum>
//	<ensemble size>
//	<length>
//	<first entry>\t<bookie>\t<bookie>...   (one line per ensemble)
//	<last entry id>\tCLOSED                 (optional; -102 means IN_RECOVERY)
//
// Format 1 has no ack quorum (= write quorum), digest or password.
func parseV1(body []byte) (*LedgerMetadata, error) {
	lines := strings.Split(string(body), "\n")
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 3 {
		return nil, fmt.Errorf("format 1: %d lines, want at least 3", len(lines))
	}
	num := func(what, s string) (int64, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("format 1: %s %q is not a number", what, s)
		}
		return n, nil
	}
	var vals [3]int64
	for i, what := range []string{"write quorum", "ensemble size", "length"} {
		n, err := num(what, lines[i])
		if err != nil {
			return nil, err
		}
		vals[i] = n
	}
	md := &LedgerMetadata{
		WriteQuorum: int(vals[0]), AckQuorum: int(vals[0]), EnsembleSize: int(vals[1]),
		State: LedgerOpen, LastEntryID: -1, Ctime: -1,
	}
	for i, line := range lines[3:] {
		parts := strings.Split(line, "\t")
		if len(parts) < 2 {
			return nil, fmt.Errorf("format 1: line %q: want tab-separated fields", line)
		}
		first, err := num("entry id", parts[0])
		if err != nil {
			return nil, err
		}
		if parts[1] == "CLOSED" {
			if i != len(lines)-4 || len(parts) != 2 {
				return nil, fmt.Errorf("format 1: CLOSED line %q is not last", line)
			}
			if first == v1RecoveryMarker {
				md.State = LedgerInRecovery
			} else {
				md.State, md.LastEntryID, md.Length = LedgerClosed, first, vals[2]
			}
			break
		}
		seg := Segment{FirstEntryID: first}
		for _, b := range parts[1:] {
			seg.Ensemble = append(seg.Ensemble, BookieID(b))
		}
		md.Ensembles = append(md.Ensembles, seg)
	}
	return md, nil
}
