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

// cookieDiff is how a configuration's cookie (master) differs from a
// stored one in its directories.
type cookieDiff struct {
	// other: the bookie id, the journal directories or the instance id
	// differ (no directory change explains it).
	other bool
	// added: ledger or index directories of master the stored cookie
	// lacks; removed: ledger or index directories of the stored cookie
	// master lacks.
	added, removed []string
	// reordered: the stored cookie's ledger directories are not the first
	// ones of master, in the same order.
	reordered bool
}

// expansion reports whether the difference is an expansion: directories
// appended and nothing else.
func (d cookieDiff) expansion() bool {
	return !d.other && len(d.removed) == 0 && !d.reordered && len(d.added) > 0
}

// diffCookies compares the directories of a stored cookie and master, for
// storage expansion. BookKeeper's rule (Cookie.verifyIsSuperSet) is that the
// configured ledger and index directories are a superset of the stored
// ones. Folio's ledger directories are positions (a ledger's index and
// state stay in directory ledgerID mod the count at creation, recorded on
// disk), so for them the stored list must be the start of the configured
// one, same order: new directories are appended. Index directories hold
// no data in Folio: a superset is enough, as in Java.
func diffCookies(stored, master *metadata.Cookie) cookieDiff {
	var d cookieDiff
	d.other = stored.BookieID != master.BookieID || !slices.Equal(stored.JournalDirs, master.JournalDirs) ||
		(stored.InstanceID != "" && master.InstanceID != "" && stored.InstanceID != master.InstanceID)
	for _, p := range [][2][]string{{stored.LedgerDirs, master.LedgerDirs}, {stored.IndexDirs, master.IndexDirs}} {
		for _, dir := range p[0] {
			if !slices.Contains(p[1], dir) {
				d.removed = append(d.removed, dir)
			}
		}
		for _, dir := range p[1] {
			if !slices.Contains(p[0], dir) {
				d.added = append(d.added, dir)
			}
		}
	}
	n := len(stored.LedgerDirs)
	d.reordered = len(d.removed) == 0 && (len(master.LedgerDirs) < n || !slices.Equal(master.LedgerDirs[:n], stored.LedgerDirs))
	return d
}

// expansionRefused refuses directories added to a bookie with data without
// allowStorageExpansion, as BookKeeper does.
func expansionRefused(id metadata.BookieID, added []string) error {
	return &CookieError{
		Why: fmt.Sprintf("the configuration adds directories %s to bookie %s, which holds data, and allowStorageExpansion is not true: "+
			"the bookie's cookie lists fewer directories", strings.Join(added, ", "), id),
		Hint: "to add the directories (empty ones, appended after the existing ledger directories), set allowStorageExpansion=true " +
			"or run `folio shell updatecookie --conf FILE --expandstorage` with the bookie stopped, then start it; " +
			"otherwise remove them from the configuration",
	}
}

// shrinkRefused refuses a configuration without directories the stored
// cookie lists: the entry logs on a removed ledger directory would be lost.
func shrinkRefused(md metadata.Driver, id metadata.BookieID, stored *metadata.Cookie, removed []string) error {
	return &CookieError{
		Why: fmt.Sprintf("the configuration lacks directories %s that the cookie of %s (%s) lists: any ledger directory may hold entry logs of every ledger "+
			"(the cookie lists ledger directories %v), and starting without one could answer \"no such entry\" for entries it acknowledged",
			strings.Join(removed, ", "), id, metadata.CookieKeyOf(md, id), stored.LedgerDirs),
		Hint: "put the directories back in the configuration (a bookie's directories can be added, never removed); " +
			"to retire a disk, decommission the bookie (`folio shell recover " + string(id) + "` or AutoRecovery), " +
			"reset it with `folio shell bookieformat --force` and start it with the directories it should have",
	}
}

// reorderRefused refuses ledger directories in another order than the
// cookie's.
func reorderRefused(id metadata.BookieID, stored, master *metadata.Cookie) error {
	return &CookieError{
		Why: fmt.Sprintf("the configuration's ledger directories %v do not start with the ledger directories %v of bookie %s's cookie, in that order: "+
			"Folio keeps each ledger in the ledger directory at a fixed position", master.LedgerDirs, stored.LedgerDirs, id),
		Hint: "list the existing ledger directories first, in their order, and append new ones after them",
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

// cookieTempPrefix starts the names of writeFileSync's temporary files:
// one left by a crash is not data.
const cookieTempPrefix = ".VERSION-"

// dirIsEmpty reports whether dir holds no data: it is absent, or its
// current/ holds nothing but temporary cookie files a crash left behind
// (Java checks current/). Those are removed.
func dirIsEmpty(dir string) (bool, error) {
	entries, err := os.ReadDir(CurrentDir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), cookieTempPrefix) {
			return false, nil
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(CurrentDir(dir), e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	return true, nil
}

// writeFileSync writes data to path atomically (temp file, fsync, rename,
// fsync of the directory).
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, cookieTempPrefix+"*")
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

// CookieOptions change what ValidateCookies accepts.
type CookieOptions struct {
	// AllowExpansion accepts ledger and index directories added to a
	// bookie with data (allowStorageExpansion; `updatecookie
	// --expandstorage` sets it, as BookKeeper's does).
	AllowExpansion bool

	// beforeWrite, if set, is called before each cookie write with the
	// file's path ("" for the metadata store's cookie); an error stops the
	// check there, as a crash would (tests).
	beforeWrite func(path string) error
}

// CookieResult is what ValidateCookies found and did.
type CookieResult struct {
	// Created: a new bookie; every directory and the metadata store were
	// stamped.
	Created bool
	// Added are the directories this check added to the bookie's cookie
	// (storage expansion), in configuration order.
	Added []string
	// RolledBack are directories whose cookie recorded an expansion that
	// the metadata store never committed (a crash part-way, then a start
	// with the configuration of before): they carry the stored cookie
	// again.
	RolledBack []string
}

// CheckCookies is ValidateCookies with cfg's allowStorageExpansion; it
// returns whether the bookie is new (cookies were just written).
func CheckCookies(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID) (created bool, err error) {
	res, err := ValidateCookies(ctx, md, cfg, id, CookieOptions{AllowExpansion: cfg.AllowStorageExpansion})
	return res.Created, err
}

// ValidateCookies is BookKeeper's legacy cookie validation
// (LegacyCookieValidation, spec/metadata.md §4), run at every start before
// the storage is opened:
//
//  1. the master cookie is built from cfg, id and the cluster's instance id;
//  2. a cookie in the metadata store must match it, or, with
//     AllowExpansion, list a subset of its directories (diffCookies: new
//     ledger directories are appended; none removed; the bookie id, journal
//     directories and instance id unchanged);
//  3. every directory's VERSION must match it, or, for a directory the
//     stored cookie lists, be the stored cookie (an expansion in progress)
//     or an expansion of it the store never committed;
//  4. directories without a cookie are accepted for a brand-new bookie
//     (no cookie in the store, no cookie in any directory, every directory
//     empty): then every directory is stamped, and the store last; and,
//     with an expansion, for the added directories, which must be empty;
//  5. anything else refuses to start with a *CookieError saying why and what
//     to do.
//
// Storage expansion writes the master cookie into the added directories
// first, then into the others, then replaces the store's cookie by
// compare-and-set on the version read. The store's cookie is the commit
// point: the storage opens (and puts entry logs in a new directory) only
// after it, so a crash before it loses nothing, and the next check
// completes the expansion (same configuration) or rolls the directories'
// cookies back to the stored one (the configuration of before). A
// concurrent change of the stored cookie fails the compare-and-set: a
// *CookieError, and the bookie does not start.
func ValidateCookies(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID, opts CookieOptions) (CookieResult, error) {
	var res CookieResult
	instanceID, err := md.ReadInstanceID(ctx)
	if errors.Is(err, metadata.ErrNoCluster) {
		return res, &CookieError{
			Why:  "the metadata store has no cluster (no instance id) at " + cfg.MetadataServiceURI,
			Hint: "initialise the cluster first: `folio shell initnewcluster --metadata-service-uri " + cfg.MetadataServiceURI + "`",
		}
	}
	if err != nil {
		return res, fmt.Errorf("read the cluster instance id: %w", err)
	}
	master := MasterCookie(cfg, id, instanceID)
	masterBytes, err := master.MarshalText()
	if err != nil {
		return res, err
	}

	stored, version, err := md.ReadCookie(ctx, id)
	switch {
	case errors.Is(err, metadata.ErrNoSuchCookie):
		return res, stampNewBookie(ctx, md, cfg, id, masterBytes, opts, &res)
	case err != nil:
		return res, fmt.Errorf("read the cookie of %s from the metadata store: %w", id, err)
	}
	storeCookie, err := metadata.ParseCookie(stored)
	if err != nil {
		return res, &CookieError{
			Why:  fmt.Sprintf("the metadata store's cookie of %s (%s) is unreadable: %v", id, metadata.CookieKeyOf(md, id), err),
			Hint: fmt.Sprintf("inspect it with `folio shell cookie get %s`; fix or delete it deliberately with `folio shell cookie update|delete %s`", id, id),
		}
	}
	expanding := false
	if err := cookiesMatch(storeCookie, master); err != nil {
		d := diffCookies(storeCookie, master)
		switch {
		case len(d.removed) > 0 && !d.other:
			return res, shrinkRefused(md, id, storeCookie, d.removed)
		case d.reordered && !d.other:
			return res, reorderRefused(id, storeCookie, master)
		case d.other || len(d.added) == 0:
			return res, &CookieError{
				Why: fmt.Sprintf("the metadata store's cookie of %s (%s) does not match this bookie's configuration (%v): "+
					"the directories, the address or the cluster changed since the bookie was first started", id, metadata.CookieKeyOf(md, id), err),
				Hint: "restore the previous configuration (directories, advertisedAddress, bookiePort, metadataServiceUri); " +
					"if the change is deliberate, update the cookie with `folio shell cookie update " + string(id) + "`, " +
					"or decommission the bookie and reset it with `folio shell bookieformat --force`",
			}
		case !opts.AllowExpansion:
			return res, expansionRefused(id, d.added)
		}
		expanding, res.Added = true, d.added
	}

	// Sort the directories: done, to stamp (added), to rewrite (an
	// expansion's old or uncommitted cookie), or missing their cookie.
	known := slices.Concat(storeCookie.JournalDirs, storeCookie.LedgerDirs, storeCookie.IndexDirs)
	var stamp, rewrite, missing []string
	for _, dir := range uniqueDirs(cfg.AllDirs()) {
		c, err := readDirCookie(dir)
		if err != nil {
			return res, err
		}
		isKnown := slices.Contains(known, dir)
		switch {
		case c == nil && isKnown:
			missing = append(missing, dir)
		case c == nil:
			// Added by this expansion (every configured directory is
			// known otherwise).
			empty, err := dirIsEmpty(dir)
			if err != nil {
				return res, fmt.Errorf("check directory %s: %w", dir, err)
			}
			if !empty {
				return res, &CookieError{
					Why:  fmt.Sprintf("new directory %s holds data but no cookie: a directory added to bookie %s must be empty", CurrentDir(dir), id),
					Hint: "add empty directories only; wipe this one deliberately if its data is not needed",
				}
			}
			stamp = append(stamp, dir)
		case cookiesMatch(c, master) == nil:
		case isKnown && cookiesMatch(c, storeCookie) == nil:
			rewrite = append(rewrite, dir) // expanding: the cookie of before
		case diffCookies(storeCookie, c).expansion():
			// An expansion the store never committed: the storage never
			// used its directories (it opens after the commit).
			rewrite = append(rewrite, dir)
			if !expanding {
				res.RolledBack = append(res.RolledBack, dir)
			}
		default:
			return res, &CookieError{
				Why: fmt.Sprintf("the cookie in %s does not match this bookie (%v): the directory belongs to another bookie or cluster, or was swapped", dir, cookiesMatch(c, master)),
				Hint: "put the right disk back in place or fix the configuration; to reuse the directory for this bookie deliberately, " +
					"reset it with `folio shell bookieformat --force` (this deletes its data)",
			}
		}
	}
	if len(missing) > 0 {
		return res, &CookieError{
			Why: fmt.Sprintf("directories %s have no cookie, but the metadata store knows bookie %s: "+
				"its data was wiped or its disks were replaced, and it could answer \"no such entry\" for entries it acknowledged", strings.Join(missing, ", "), id),
			Hint: "restore the bookie's directories if you can; otherwise let AutoRecovery or `folio shell recover` re-replicate its ledgers, " +
				"then delete its cookie deliberately with `folio shell cookie delete " + string(id) + "` (or run `folio shell bookieformat --force` on this machine) and start it as a new bookie",
		}
	}
	for _, dir := range slices.Concat(stamp, rewrite) {
		if err := writeDirCookie(dir, masterBytes, opts); err != nil {
			return res, err
		}
	}
	if !expanding {
		return res, nil
	}
	if opts.beforeWrite != nil {
		if err := opts.beforeWrite(""); err != nil {
			return res, err
		}
	}
	if _, err := md.WriteCookie(ctx, id, masterBytes, version); err != nil {
		if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNoSuchCookie) {
			return res, &CookieError{
				Why: fmt.Sprintf("the cookie of %s in the metadata store (%s) changed while this bookie was adding directories %s to it: "+
					"another process with this bookie id, or an operator, wrote it", id, metadata.CookieKeyOf(md, id), strings.Join(res.Added, ", ")),
				Hint: "make sure only one bookie runs with this id and inspect the cookie with `folio shell cookie get " + string(id) + "`; then start it again",
			}
		}
		return res, fmt.Errorf("store the expanded cookie of %s: %w", id, err)
	}
	return res, nil
}

// uniqueDirs is dirs without repetitions (a directory may be both a ledger
// and an index directory), in order.
func uniqueDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// writeDirCookie writes the cookie file of dir.
func writeDirCookie(dir string, data []byte, opts CookieOptions) error {
	path := filepath.Join(CurrentDir(dir), VersionFile)
	if opts.beforeWrite != nil {
		if err := opts.beforeWrite(path); err != nil {
			return err
		}
	}
	if err := writeFileSync(path, data); err != nil {
		return fmt.Errorf("write the cookie to %s: %w", dir, err)
	}
	return nil
}

// stampNewBookie is ValidateCookies without a stored cookie: a new bookie
// if no directory has a cookie and every one is empty. It stamps every
// directory, then the store.
func stampNewBookie(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID, masterBytes []byte, opts CookieOptions, res *CookieResult) error {
	dirs := uniqueDirs(cfg.AllDirs())
	for _, dir := range dirs {
		c, err := readDirCookie(dir)
		if err != nil {
			return err
		}
		if c != nil {
			return &CookieError{
				Why: fmt.Sprintf("some directories carry cookies of bookie %s, but the metadata store has none: "+
					"the cookie was deleted, or the bookie points at a different cluster than before", id),
				Hint: "check metadataServiceUri; if the bookie is meant to join this cluster afresh, reset it with `folio shell bookieformat --force` (this deletes its data)",
			}
		}
	}
	for _, dir := range dirs {
		empty, err := dirIsEmpty(dir)
		if err != nil {
			return fmt.Errorf("check directory %s: %w", dir, err)
		}
		if !empty {
			return &CookieError{
				Why: fmt.Sprintf("%s holds data but no cookie, and the metadata store has no cookie for %s: "+
					"the data belongs to an unknown bookie", CurrentDir(dir), id),
				Hint: "point the bookie at empty directories, or wipe them deliberately with `folio shell bookieformat --force`",
			}
		}
	}
	for _, dir := range dirs {
		if err := writeDirCookie(dir, masterBytes, opts); err != nil {
			return err
		}
	}
	if opts.beforeWrite != nil {
		if err := opts.beforeWrite(""); err != nil {
			return err
		}
	}
	if _, err := md.WriteCookie(ctx, id, masterBytes, metadata.VersionNew); err != nil {
		if errors.Is(err, metadata.ErrCookieExists) {
			return &CookieError{
				Why:  fmt.Sprintf("another process registered a cookie for %s while this bookie was starting", id),
				Hint: "make sure only one bookie runs with this id; then start it again",
			}
		}
		return fmt.Errorf("store the cookie of %s: %w", id, err)
	}
	res.Created = true
	return nil
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
