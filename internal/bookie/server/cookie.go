package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/foliodb/folio/internal/metadata"
)

// Cookie files, as Java lays them out: <dir>/current/VERSION in every
// journal, ledger and index directory (spec/metadata.md §4).
const (
	CurrentDirName = "current"
	VersionFile    = "VERSION"
)

// CurrentDir is the directory inside a configured directory that holds the
// cookie and the data.
func CurrentDir(dir string) string { return filepath.Join(dir, CurrentDirName) }

// CookieError is a start-up refusal: the bookie's directories and the
// metadata store disagree about who it is. Why says what was found; Hint
// says what an operator may do. The bookie must not start: it could answer
// "no such entry" for data it lost (DESIGN.md §6, invariant 6).
type CookieError struct {
	Why  string
	Hint string
}

func (e *CookieError) Error() string { return "cookie check failed: " + e.Why }

// MasterCookie is the cookie the configuration describes: what every
// directory and the metadata store must hold.
func MasterCookie(cfg *Config, id metadata.BookieID, instanceID string) *metadata.Cookie {
	return &metadata.Cookie{
		LayoutVersion: metadata.CookieLayoutVersion,
		BookieID:      id,
		JournalDirs:   slices.Clone(cfg.JournalDirs),
		LedgerDirs:    slices.Clone(cfg.LedgerDirs),
		InstanceID:    instanceID,
		IndexDirs:     slices.Clone(cfg.IndexDirs),
	}
}

// cookiesMatch is Java's Cookie.verify: same bookie id, directories and
// instance id (an absent instance id on either side, from layout 3, is not
// compared, as Java skips it).
func cookiesMatch(a, b *metadata.Cookie) error {
	var diffs []string
	if a.BookieID != b.BookieID {
		diffs = append(diffs, fmt.Sprintf("bookie id %s vs %s", a.BookieID, b.BookieID))
	}
	if !slices.Equal(a.JournalDirs, b.JournalDirs) {
		diffs = append(diffs, fmt.Sprintf("journal dirs %v vs %v", a.JournalDirs, b.JournalDirs))
	}
	if !slices.Equal(a.LedgerDirs, b.LedgerDirs) {
		diffs = append(diffs, fmt.Sprintf("ledger dirs %v vs %v", a.LedgerDirs, b.LedgerDirs))
	}
	if !slices.Equal(a.IndexDirs, b.IndexDirs) {
		diffs = append(diffs, fmt.Sprintf("index dirs %v vs %v", a.IndexDirs, b.IndexDirs))
	}
	if a.InstanceID != "" && b.InstanceID != "" && a.InstanceID != b.InstanceID {
		diffs = append(diffs, fmt.Sprintf("cluster instance id %s vs %s", a.InstanceID, b.InstanceID))
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// expansion returns the ledger and index directories the configuration
// (master) adds to the stored cookie when that is the only difference (the
// check BookKeeper's allowStorageExpansion relaxes: Cookie.verifyIsSuperSet),
// else nil.
func expansion(stored, master *metadata.Cookie) []string {
	if stored.BookieID != master.BookieID || !slices.Equal(stored.JournalDirs, master.JournalDirs) ||
		(stored.InstanceID != "" && master.InstanceID != "" && stored.InstanceID != master.InstanceID) {
		return nil
	}
	var added []string
	for _, p := range [][2][]string{{stored.LedgerDirs, master.LedgerDirs}, {stored.IndexDirs, master.IndexDirs}} {
		for _, d := range p[0] {
			if !slices.Contains(p[1], d) {
				return nil // a directory was removed: not an expansion
			}
		}
		for _, d := range p[1] {
			if !slices.Contains(p[0], d) {
				added = append(added, d)
			}
		}
	}
	return added
}

// expansionError refuses to add directories to a bookie with data. Java
// accepts it with allowStorageExpansion=true; Folio places each ledger in
// the ledger directory ledger id mod their count (recorded on disk), so a
// new directory would move ledgers away from their entries and index: a
// read could answer "no such entry" for an acknowledged entry.
func expansionError(cfg *Config, id metadata.BookieID, added []string) error {
	hint := "remove the new directories from the configuration; to use more disks, decommission the bookie " +
		"(AutoRecovery or `folio shell recover " + string(id) + "` re-replicates its ledgers), reset it with " +
		"`folio shell bookieformat --force` and start it with every directory"
	if cfg.AllowStorageExpansion {
		return &CookieError{
			Why: fmt.Sprintf("the configuration adds directories %s to bookie %s, which holds data, and sets allowStorageExpansion=true: "+
				"Folio does not support storage expansion (a ledger's entries and index stay in the ledger directory chosen by ledger id mod the number of directories)",
				strings.Join(added, ", "), id),
			Hint: hint,
		}
	}
	return &CookieError{
		Why: fmt.Sprintf("the configuration adds directories %s to bookie %s, which holds data: its cookie lists fewer directories "+
			"(allowStorageExpansion=false, as BookKeeper refuses it; Folio does not support expansion at all)", strings.Join(added, ", "), id),
		Hint: hint,
	}
}

// readDirCookie reads <dir>/current/VERSION; (nil, nil) if absent.
func readDirCookie(dir string) (*metadata.Cookie, error) {
	p := filepath.Join(CurrentDir(dir), VersionFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cookie %s: %w", p, err)
	}
	c, err := metadata.ParseCookie(data)
	if err != nil {
		return nil, &CookieError{
			Why:  fmt.Sprintf("%s is not a readable cookie: %v", p, err),
			Hint: "restore the file from the bookie's other directories, or reset the bookie with `folio shell bookieformat --force` (this deletes its data)",
		}
	}
	return c, nil
}

// dirIsEmpty reports whether dir holds no data: it is absent, or it has no
// entries other than an empty current/ (Java checks current/).
func dirIsEmpty(dir string) (bool, error) {
	entries, err := os.ReadDir(CurrentDir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

// writeFileSync writes data to path atomically (temp file, fsync, rename,
// fsync of the directory).
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".VERSION-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// CheckCookies is BookKeeper's legacy cookie validation
// (LegacyCookieValidation, spec/metadata.md §4), run at every start before
// the storage is opened:
//
//  1. the master cookie is built from cfg, id and the cluster's instance id;
//  2. a cookie in the metadata store must match it;
//  3. every directory's VERSION must match it;
//  4. directories without a cookie are accepted only for a brand-new bookie
//     (no cookie in the store, no cookie in any directory, every directory
//     empty): then every directory is stamped, and the store last;
//  5. anything else refuses to start with a *CookieError saying why and what
//     to do. Storage expansion (allowStorageExpansion) is not supported.
//
// It returns whether the bookie is new (cookies were just written).
func CheckCookies(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID) (created bool, err error) {
	instanceID, err := md.ReadInstanceID(ctx)
	if errors.Is(err, metadata.ErrNoCluster) {
		return false, &CookieError{
			Why:  "the metadata store has no cluster (no instance id) at " + cfg.MetadataServiceURI,
			Hint: "initialise the cluster first: `folio shell initnewcluster --metadata-service-uri " + cfg.MetadataServiceURI + "`",
		}
	}
	if err != nil {
		return false, fmt.Errorf("read the cluster instance id: %w", err)
	}
	master := MasterCookie(cfg, id, instanceID)
	masterBytes, err := master.MarshalText()
	if err != nil {
		return false, err
	}

	stored, _, err := md.ReadCookie(ctx, id)
	var storeCookie *metadata.Cookie
	switch {
	case errors.Is(err, metadata.ErrNoSuchCookie):
	case err != nil:
		return false, fmt.Errorf("read the cookie of %s from the metadata store: %w", id, err)
	default:
		if storeCookie, err = metadata.ParseCookie(stored); err != nil {
			return false, &CookieError{
				Why:  fmt.Sprintf("the metadata store's cookie of %s (%s) is unreadable: %v", id, metadata.CookieKeyOf(md, id), err),
				Hint: fmt.Sprintf("inspect it with `folio shell cookie get %s`; fix or delete it deliberately with `folio shell cookie update|delete %s`", id, id),
			}
		}
		if err := cookiesMatch(storeCookie, master); err != nil {
			if added := expansion(storeCookie, master); len(added) > 0 {
				return false, expansionError(cfg, id, added)
			}
			return false, &CookieError{
				Why: fmt.Sprintf("the metadata store's cookie of %s (%s) does not match this bookie's configuration (%v): "+
					"the directories, the address or the cluster changed since the bookie was first started", id, metadata.CookieKeyOf(md, id), err),
				Hint: "restore the previous configuration (directories, advertisedAddress, bookiePort, metadataServiceUri); " +
					"if the change is deliberate, update the cookie with `folio shell cookie update " + string(id) + "`, " +
					"or decommission the bookie and reset it with `folio shell bookieformat --force`",
			}
		}
	}

	var missing []string
	for _, dir := range cfg.AllDirs() {
		c, err := readDirCookie(dir)
		if err != nil {
			return false, err
		}
		if c == nil {
			missing = append(missing, dir)
			continue
		}
		if err := cookiesMatch(c, master); err != nil {
			return false, &CookieError{
				Why: fmt.Sprintf("the cookie in %s does not match this bookie (%v): the directory belongs to another bookie or cluster, or was swapped", dir, err),
				Hint: "put the right disk back in place or fix the configuration; to reuse the directory for this bookie deliberately, " +
					"reset it with `folio shell bookieformat --force` (this deletes its data)",
			}
		}
	}

	switch {
	case storeCookie != nil && len(missing) == 0:
		return false, nil // a known bookie with all its directories
	case storeCookie != nil:
		return false, &CookieError{
			Why: fmt.Sprintf("directories %s have no cookie, but the metadata store knows bookie %s: "+
				"its data was wiped or its disks were replaced, and it could answer \"no such entry\" for entries it acknowledged", strings.Join(missing, ", "), id),
			Hint: "restore the bookie's directories if you can; otherwise let AutoRecovery or `folio shell recover` re-replicate its ledgers, " +
				"then delete its cookie deliberately with `folio shell cookie delete " + string(id) + "` (or run `folio shell bookieformat --force` on this machine) and start it as a new bookie",
		}
	case len(missing) < len(cfg.AllDirs()):
		return false, &CookieError{
			Why: fmt.Sprintf("some directories carry cookies of bookie %s, but the metadata store has none: "+
				"the cookie was deleted, or the bookie points at a different cluster than before", id),
			Hint: "check metadataServiceUri; if the bookie is meant to join this cluster afresh, reset it with `folio shell bookieformat --force` (this deletes its data)",
		}
	}

	// A new bookie: every directory must be empty.
	for _, dir := range cfg.AllDirs() {
		empty, err := dirIsEmpty(dir)
		if err != nil {
			return false, fmt.Errorf("check directory %s: %w", dir, err)
		}
		if !empty {
			return false, &CookieError{
				Why: fmt.Sprintf("%s holds data but no cookie, and the metadata store has no cookie for %s: "+
					"the data belongs to an unknown bookie", CurrentDir(dir), id),
				Hint: "point the bookie at empty directories, or wipe them deliberately with `folio shell bookieformat --force`",
			}
		}
	}
	for _, dir := range cfg.AllDirs() {
		if err := writeFileSync(filepath.Join(CurrentDir(dir), VersionFile), masterBytes); err != nil {
			return false, fmt.Errorf("write the cookie to %s: %w", dir, err)
		}
	}
	if _, err := md.WriteCookie(ctx, id, masterBytes, metadata.VersionNew); err != nil {
		if errors.Is(err, metadata.ErrCookieExists) {
			return false, &CookieError{
				Why:  fmt.Sprintf("another process registered a cookie for %s while this bookie was starting", id),
				Hint: "make sure only one bookie runs with this id; then start it again",
			}
		}
		return false, fmt.Errorf("store the cookie of %s: %w", id, err)
	}
	return true, nil
}

// FormatBookie is `bookieformat`: it deletes everything under the current/
// directories of cfg (data and cookies) and the bookie's cookie in the
// metadata store, so that the bookie starts as a new one. It refuses while
// the bookie is registered (running).
func FormatBookie(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID) error {
	for _, list := range []func(context.Context) ([]metadata.BookieID, error){md.WritableBookies, md.ReadOnlyBookies} {
		ids, err := list(ctx)
		if err != nil {
			return fmt.Errorf("check whether %s is running: %w", id, err)
		}
		if slices.Contains(ids, id) {
			return &CookieError{
				Why:  fmt.Sprintf("bookie %s is registered (running); not formatting it", id),
				Hint: "stop the bookie first",
			}
		}
	}
	for _, dir := range cfg.AllDirs() {
		if err := os.RemoveAll(CurrentDir(dir)); err != nil {
			return fmt.Errorf("wipe %s: %w", CurrentDir(dir), err)
		}
	}
	if err := md.DeleteCookie(ctx, id, metadata.VersionAny); err != nil && !errors.Is(err, metadata.ErrNoSuchCookie) {
		return fmt.Errorf("delete the cookie of %s: %w", id, err)
	}
	return nil
}
