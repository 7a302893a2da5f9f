package zk

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Manager is a ZooKeeper ledger manager: where ledger znodes live and how
// ids are generated (Java's *LedgerManagerFactory).
type Manager int

const (
	// Hierarchical is BookKeeper's default ("hybrid") manager: ids below
	// Integer.MAX_VALUE at the short path 2-4-4, the others at the long
	// path 3-4-4-4-4; ids from idgen/ID- until they pass 2^31-1, then from
	// idgen-long/HOB-….
	Hierarchical Manager = iota + 1
	// LongHierarchical stores every id at the long path; ids as Hierarchical.
	LongHierarchical
	// LegacyHierarchical stores every id at the short path; ids from
	// idgen/ID- only (up to 2^31-2).
	LegacyHierarchical
	// Flat stores ledger L%010d directly under the root; ids from <root>/ID-.
	Flat
)

// Java's factory classes (LedgerLayout's managerFactoryClass) and their
// manager version, 1 for all four.
const (
	hierarchicalFactory       = "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
	longHierarchicalFactory   = "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory"
	legacyHierarchicalFactory = "org.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory"
	flatFactory               = "org.apache.bookkeeper.meta.FlatLedgerManagerFactory"
	msFactory                 = "org.apache.bookkeeper.meta.MSLedgerManagerFactory"
	managerVersion            = 1
	layoutFormatVersion       = 2
)

// String is the manager's type name, as in a `zk+<type>://` URI.
func (m Manager) String() string {
	switch m {
	case Hierarchical:
		return "hierarchical"
	case LongHierarchical:
		return "longhierarchical"
	case LegacyHierarchical:
		return "legacyhierarchical"
	case Flat:
		return "flat"
	}
	return fmt.Sprintf("Manager(%d)", int(m))
}

// FactoryClass is the Java factory class LAYOUT names for m.
func (m Manager) FactoryClass() string {
	switch m {
	case Hierarchical:
		return hierarchicalFactory
	case LongHierarchical:
		return longHierarchicalFactory
	case LegacyHierarchical:
		return legacyHierarchicalFactory
	case Flat:
		return flatFactory
	}
	return ""
}

// LayoutValue is the content of `<root>/LAYOUT` for m, as Java's
// LedgerLayout.serialize writes it: "2\n<factory class>:1", UTF-8, no
// trailing newline.
func (m Manager) LayoutValue() string {
	return fmt.Sprintf("%d\n%s:%d", layoutFormatVersion, m.FactoryClass(), managerVersion)
}

// ManagerFromURIType maps the type of a `zk+<type>://` URI to a manager, as
// Java's ZKMetadataDriverBase.resolveLedgerManagerFactory does: "" and
// "null" mean "whatever LAYOUT says" (0, nil); "ms" and unknown types are
// refused, naming them.
func ManagerFromURIType(t string) (Manager, error) {
	switch strings.ToLower(t) {
	case "", "null":
		return 0, nil
	case "hierarchical":
		return Hierarchical, nil
	case "longhierarchical":
		return LongHierarchical, nil
	case "flat":
		return Flat, nil
	case "ms":
		return 0, fmt.Errorf("zk+ms:// (%s, ledger metadata in a MetaStore table) is not supported by Folio; use zk://, zk+hierarchical://, zk+longhierarchical:// or zk+flat://", msFactory)
	}
	return 0, fmt.Errorf("unknown ledger manager type %q in zk+%s:// (known: hierarchical, longhierarchical, flat, null)", t, t)
}

// ParseLayout parses a LAYOUT value as Java's LedgerLayout.parseLayout
// does: "<format version>\n<factory>:<manager version>", format 1 or 2.
// Format 1 names the manager type ("flat", "hierarchical") instead of a
// class. A manager Folio does not implement (MSLedgerManagerFactory, a
// custom class) or a manager version other than 1 is an error.
func ParseLayout(value []byte) (Manager, error) {
	s := string(value)
	lines := strings.Split(s, "\n")
	format, err := strconv.Atoi(lines[0])
	if err != nil {
		return 0, fmt.Errorf("layout %q: format version %q is not a number", s, lines[0])
	}
	if format < 1 || format > layoutFormatVersion {
		return 0, fmt.Errorf("layout %q: format version %d is not 1 or 2", s, format)
	}
	if len(lines) < 2 {
		return 0, fmt.Errorf("layout %q: no ledger manager line", s)
	}
	parts := strings.Split(lines[1], ":")
	if len(parts) != 2 {
		return 0, fmt.Errorf("layout %q: ledger manager line %q is not <factory>:<version>", s, lines[1])
	}
	version, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, fmt.Errorf("layout %q: manager version %q is not a number", s, parts[1])
	}
	var m Manager
	switch parts[0] {
	case hierarchicalFactory:
		m = Hierarchical
	case longHierarchicalFactory:
		m = LongHierarchical
	case legacyHierarchicalFactory:
		m = LegacyHierarchical
	case flatFactory:
		m = Flat
	case "hierarchical":
		if format == 1 {
			m = Hierarchical
		}
	case "flat":
		if format == 1 {
			m = Flat
		}
	}
	if m == 0 {
		return 0, fmt.Errorf("layout %q: ledger manager %q is not one Folio implements (HierarchicalLedgerManagerFactory, LongHierarchicalLedgerManagerFactory, LegacyHierarchicalLedgerManagerFactory, FlatLedgerManagerFactory)", s, parts[0])
	}
	if version != managerVersion {
		return 0, fmt.Errorf("layout %q: %s version %d is not %d", s, parts[0], version, managerVersion)
	}
	return m, nil
}

// maxShortID bounds the short (2-4-4) path: ten digits.
const maxShortID = 9_999_999_999

// LedgerPath returns the znode of ledger id under root for manager m
// (Java's StringUtils.get*LedgerPath). It fails for an id the manager
// cannot store (the legacy short path holds ten digits).
func (m Manager) LedgerPath(root string, id int64) (string, error) {
	if id < 0 {
		return "", fmt.Errorf("ledger id %d is negative", id)
	}
	switch m {
	case Hierarchical:
		if id < math.MaxInt32 {
			return root + shortPath(id), nil
		}
		return root + longPath(id), nil
	case LongHierarchical:
		return root + longPath(id), nil
	case LegacyHierarchical:
		if id > maxShortID {
			return "", fmt.Errorf("ledger id %d does not fit the legacy hierarchical layout (ten digits at most)", id)
		}
		return root + shortPath(id), nil
	case Flat:
		return fmt.Sprintf("%s/L%010d", root, id), nil
	}
	return "", fmt.Errorf("unknown ledger manager %v", m)
}

// shortPath is "/" + %010d split 2-4-4 with "L" before the last part:
// 12345 → /00/0001/L2345.
func shortPath(id int64) string {
	s := fmt.Sprintf("%010d", id)
	return "/" + s[0:2] + "/" + s[2:6] + "/L" + s[6:10]
}

// longPath is "/" + %019d split 3-4-4-4-4 with "L" before the last part:
// 360287970189639681 → /036/0287/9701/8963/L9681.
func longPath(id int64) string {
	s := fmt.Sprintf("%019d", id)
	return "/" + s[0:3] + "/" + s[3:7] + "/" + s[7:11] + "/" + s[11:15] + "/L" + s[15:19]
}

// trees returns the digit widths of the levels of m's ledger trees (the
// last is the leaf's, after "L"), in listing order. Flat has none.
func (m Manager) trees() [][]int {
	short, long := []int{2, 4, 4}, []int{3, 4, 4, 4, 4}
	switch m {
	case Hierarchical:
		return [][]int{short, long}
	case LongHierarchical:
		return [][]int{long}
	case LegacyHierarchical:
		return [][]int{short}
	}
	return nil
}

// Top-level znodes under the root that are not ledger trees (Java's
// AbstractZkLedgerManager.isSpecialZnode, plus disableHealthCheck).
const (
	availableNode          = "available"
	readonlyNode           = "readonly"
	cookiesNode            = "cookies"
	layoutNode             = "LAYOUT"
	instanceIDNode         = "INSTANCEID"
	underReplicationNode   = "underreplication"
	idgenNode              = "idgen"
	idgenLongNode          = "idgen-long"
	idPrefix               = "ID-"
	hobPrefix              = "HOB-"
	disableHealthCheckNode = "disableHealthCheck"
)

func isSpecialNode(name string) bool {
	switch name {
	case availableNode, cookiesNode, layoutNode, instanceIDNode, underReplicationNode, idgenNode, idgenLongNode, disableHealthCheckNode:
		return true
	}
	return strings.HasPrefix(name, idPrefix)
}

// isLedgerParent reports whether a child of the root holds ledgers of m
// (Java's getLedgerParentNodeRegex: \d{2,3}, \d{3}, \d{2}, L\d{10}).
func (m Manager) isLedgerParent(name string) bool {
	switch m {
	case Hierarchical:
		return (len(name) == 2 || len(name) == 3) && allDigits(name)
	case LongHierarchical:
		return len(name) == 3 && allDigits(name)
	case LegacyHierarchical:
		return len(name) == 2 && allDigits(name)
	case Flat:
		return len(name) >= 11 && name[0] == 'L' && allDigits(name[1:])
	}
	return false
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
