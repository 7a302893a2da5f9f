package metadata

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// EncodeUnderReplicated returns the stored value of an under-replication
// record: the protobuf TextFormat of UnderreplicatedLedgerFormat as Java's
// ZooKeeper manager writes it (`replica: "<id>"` lines, then
// `ctime: <ms>`; a zero ctime is left out), with Java's string escapes.
func EncodeUnderReplicated(missing []BookieID, ctime time.Time) string {
	var b bytes.Buffer
	for _, m := range missing {
		textField(&b, "replica", string(m))
	}
	if !ctime.IsZero() {
		fmt.Fprintf(&b, "ctime: %d\n", ctime.UnixMilli())
	}
	return b.String()
}

// DecodeUnderReplicated parses a record value (TextFormat): the missing
// bookies, ascending without duplicates, and the ctime (zero if absent).
// The caller says where the value came from when it reports an error.
func DecodeUnderReplicated(value []byte) ([]BookieID, time.Time, error) {
	var f formatpb.UnderreplicatedLedgerFormat
	if err := prototext.Unmarshal(value, &f); err != nil {
		return nil, time.Time{}, err
	}
	var missing []BookieID
	for _, r := range f.Replica {
		missing = append(missing, BookieID(r))
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	var ctime time.Time
	if f.Ctime != nil {
		ctime = time.UnixMilli(f.GetCtime())
	}
	return missing, ctime, nil
}
