package metadata

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// CookieLayoutVersion is the cookie layout Folio writes: the line "5", then
// the protobuf text format of CookieFormat (spec/metadata.md §4).
const CookieLayoutVersion = 5

// Cookie is a bookie's identity stamp: stored in the metadata store under its
// bookie id and in a VERSION file in each of its directories, so that a
// bookie whose disks were wiped or swapped refuses to start instead of
// answering "no such entry" for data it lost (DESIGN.md §6, invariant 6).
type Cookie struct {
	// LayoutVersion is the layout the cookie was read in (3 or 4–5; Folio
	// writes CookieLayoutVersion).
	LayoutVersion int
	BookieID      BookieID
	// JournalDirs is the configured journal directories; stored joined with
	// ",".
	JournalDirs []string
	// LedgerDirs is stored as "<count>\t<dir>\t<dir>...".
	LedgerDirs []string
	// InstanceID is the cluster's instance id; empty when absent (layout 3).
	InstanceID string
	// IndexDirs is present only when index directories are configured;
	// stored as LedgerDirs is.
	IndexDirs []string
}

// MarshalText renders the cookie exactly as Java BookKeeper 4.17 does
// (Cookie.toString: the layout line, then TextFormat of CookieFormat, one
// `name: "value"` line per present field in field-number order), so that a
// Java bookie reads Folio's cookies and the bytes are stable. Go's prototext
// is not used for writing: its output is deliberately unstable.
func (c *Cookie) MarshalText() ([]byte, error) {
	if err := ValidateBookieID(c.BookieID); err != nil {
		return nil, fmt.Errorf("cookie: %w", err)
	}
	if len(c.LedgerDirs) == 0 || len(c.JournalDirs) == 0 {
		return nil, fmt.Errorf("cookie of %s: journal and ledger directories are required", c.BookieID)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", CookieLayoutVersion)
	textField(&b, "bookieHost", string(c.BookieID))
	textField(&b, "journalDir", strings.Join(c.JournalDirs, ","))
	textField(&b, "ledgerDirs", encodeDirs(c.LedgerDirs))
	if c.InstanceID != "" {
		textField(&b, "instanceId", c.InstanceID)
	}
	if len(c.IndexDirs) > 0 {
		textField(&b, "indexDirs", encodeDirs(c.IndexDirs))
	}
	return b.Bytes(), nil
}

// ParseCookie reads a cookie of layout 3 (four plain lines) or 4 and above
// (text format), as Java does; layouts below 3 are refused. Errors say what
// is wrong; the caller adds where the bytes came from.
func ParseCookie(data []byte) (*Cookie, error) {
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	layout, err := strconv.Atoi(strings.TrimSpace(string(first)))
	if err != nil {
		return nil, fmt.Errorf("cookie: first line %q is not a layout version", first)
	}
	if layout < 3 {
		return nil, fmt.Errorf("cookie: layout version %d is too old (3 and above are supported)", layout)
	}
	c := &Cookie{LayoutVersion: layout}
	if layout == 3 {
		lines := strings.Split(string(rest), "\n")
		if len(lines) < 3 {
			return nil, fmt.Errorf("cookie: layout 3 needs bookie, journal and ledger lines, found %d lines", len(lines))
		}
		c.BookieID, c.JournalDirs = BookieID(lines[0]), strings.Split(lines[1], ",")
		if c.LedgerDirs, err = decodeDirs(lines[2]); err != nil {
			return nil, err
		}
		return c, nil
	}
	var f formatpb.CookieFormat
	if err := prototext.Unmarshal(rest, &f); err != nil {
		return nil, fmt.Errorf("cookie: %v", err)
	}
	c.BookieID = BookieID(f.GetBookieHost())
	c.JournalDirs = strings.Split(f.GetJournalDir(), ",")
	c.InstanceID = f.GetInstanceId()
	if c.LedgerDirs, err = decodeDirs(f.GetLedgerDirs()); err != nil {
		return nil, err
	}
	if f.IndexDirs != nil {
		if c.IndexDirs, err = decodeDirs(f.GetIndexDirs()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// encodeDirs is Java's serializeDirs: the count, then each directory,
// tab-separated.
func encodeDirs(dirs []string) string {
	return strconv.Itoa(len(dirs)) + "\t" + strings.Join(dirs, "\t")
}

func decodeDirs(s string) ([]string, error) {
	parts := strings.Split(s, "\t")
	n, err := strconv.Atoi(parts[0])
	if err != nil || n != len(parts)-1 || n < 1 {
		return nil, fmt.Errorf("cookie: directory list %q is not \"<count>\\t<dir>...\" with a matching count", s)
	}
	return parts[1:], nil
}

// textField writes one string field as Java's TextFormat prints it: printable
// ASCII as is, the C escapes for \a \b \f \n \r \t \v \\ \' \", and every other
// byte (UTF-8 included) as a three-digit octal escape.
func textField(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteString(": \"")
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\v':
			b.WriteString(`\v`)
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '"':
			b.WriteString(`\"`)
		default:
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(b, "\\%03o", c)
			}
		}
	}
	b.WriteString("\"\n")
}
