package etcd

import (
	"fmt"
	"strconv"

	"github.com/foliodb/folio/internal/metadata"
)

// Key names under the scope, as Java's EtcdConstants/EtcdUtils build them
// (spec/metadata.md §2.2). They are wire contracts: Java bookies garbage-
// collect every ledger whose key they do not find where they look.
const (
	layoutNode           = "layout"
	instanceIDNode       = "instanceid"
	cookiesNode          = "cookies"
	bookiesNode          = "bookies"
	writableNode         = "writable"
	readonlyNode         = "readonly"
	ledgersNode          = "ledgers"
	bucketsNode          = "buckets"
	underReplicationNode = "underreplication"

	// LayoutValue is the value of `<scope>/layout`: LedgerLayout's
	// `<layoutFormatVersion>\n<factoryClass>:<managerVersion>` for the etcd
	// ledger manager factory, UTF-8, no trailing newline (§2.8).
	LayoutValue = "2\norg.apache.bookkeeper.metadata.etcd.EtcdLedgerManagerFactory:0"

	// NumBuckets is the number of id-generation buckets (Java's
	// NUM_BUCKETS = 0x80, §2.4).
	NumBuckets = 0x80
	// bucketShift places the bucket in the top byte of a ledger id.
	bucketShift = 56
	// maxBucketVersion is the largest per-bucket counter that fits below the
	// bucket byte (2^56-1).
	maxBucketVersion = 1<<bucketShift - 1
)

// keys holds the full keys of one scope.
type keys struct {
	scope string // e.g. "/ledgers": the cluster marker key itself

	layout, instanceID string
	cookies            string // placeholder; cookies are under cookies + "/"
	bookies            string // placeholder
	writable, readonly string // placeholders; registrations are under + "/"
	ledgers            string // placeholder; ledgers are under + "/"
	buckets            string // placeholder; buckets are under + "/"
	underReplication   string // placeholder
}

func newKeys(scope string) keys {
	k := keys{scope: scope}
	k.layout = scope + "/" + layoutNode
	k.instanceID = scope + "/" + instanceIDNode
	k.cookies = scope + "/" + cookiesNode
	k.bookies = scope + "/" + bookiesNode
	k.writable = k.bookies + "/" + writableNode
	k.readonly = k.bookies + "/" + readonlyNode
	k.ledgers = scope + "/" + ledgersNode
	k.buckets = scope + "/" + bucketsNode
	k.underReplication = scope + "/" + underReplicationNode
	return k
}

// placeholders are the keys InitNewCluster writes, in Java's order, with
// empty values except layout and instanceid (filled in by the caller).
func (k keys) placeholders() []string {
	return []string{k.scope, k.layout, k.instanceID, k.cookies, k.bookies, k.writable, k.readonly, k.ledgers, k.buckets, k.underReplication}
}

// prefixEnd returns the end of the range of keys under dir + "/": dir + "0",
// '0' being the byte after '/' (what Java and etcd's WithPrefix use).
func prefixEnd(dir string) string { return dir + "0" }

func (k keys) cookie(id metadata.BookieID) string { return k.cookies + "/" + string(id) }

func (k keys) registration(id metadata.BookieID, readOnly bool) string {
	if readOnly {
		return k.readonly + "/" + string(id)
	}
	return k.writable + "/" + string(id)
}

func (k keys) bucket(b int) string { return fmt.Sprintf("%s/%03d", k.buckets, b) }

// ledger returns `<scope>/ledgers/<uuid>` for id (§2.3).
func (k keys) ledger(id int64) string { return k.ledgers + "/" + LedgerUUID(id) }

// LedgerUUID returns the text of Java's `new UUID(0, id)`: lowercase hex in
// 8-4-4-4-12 groups, the most significant half all zeros, so
// `00000000-0000-0000-` + the top 16 bits of id + `-` + its low 48 bits.
// For ids ≥ 0 the text sorts as the number does.
func LedgerUUID(id int64) string {
	u := uint64(id)
	const hexdigits = "0123456789abcdef"
	b := []byte("00000000-0000-0000-0000-000000000000")
	for i := 35; i >= 19; i-- {
		if b[i] == '-' {
			continue
		}
		b[i] = hexdigits[u&0xf]
		u >>= 4
	}
	return string(b)
}

// ParseLedgerUUID is the inverse of LedgerUUID. It accepts only the
// canonical form LedgerUUID writes (36 characters, lowercase, most
// significant half zero, id in [0, MaxInt64]); anything else is an error.
// Java's UUID.fromString is laxer (upper case, short groups), but Folio
// never reads a ledger through a non-canonical key, so it must not list one
// either.
func ParseLedgerUUID(s string) (int64, error) {
	const prefix = "00000000-0000-0000-"
	if len(s) != 36 || s[:len(prefix)] != prefix || s[23] != '-' {
		return 0, fmt.Errorf("%q is not a ledger UUID (want 00000000-0000-0000-xxxx-xxxxxxxxxxxx)", s)
	}
	hex := s[19:23] + s[24:]
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, fmt.Errorf("%q is not a ledger UUID: %q is not a lowercase hex digit", s, c)
		}
	}
	u, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || u > 1<<63-1 {
		return 0, fmt.Errorf("%q is not a ledger UUID: id out of range", s)
	}
	return int64(u), nil
}
