package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/metadata"
)

// The offline cookie operations of `updatecookie` (BookKeeper's
// AdminCommand): run against a stopped bookie's configuration and
// directories, as BookKeeper does. Each refuses while the bookie is
// registered: a running bookie holds its cookie's identity.

// refuseRunning fails if any of ids is registered (writable or read-only).
func refuseRunning(ctx context.Context, md metadata.Registration, ids ...metadata.BookieID) error {
	for _, list := range []func(context.Context) ([]metadata.BookieID, error){md.WritableBookies, md.ReadOnlyBookies} {
		reg, err := list(ctx)
		if err != nil {
			return fmt.Errorf("check whether the bookie is running: %w", err)
		}
		for _, id := range ids {
			if slices.Contains(reg, id) {
				return &CookieError{Why: fmt.Sprintf("bookie %s is registered (running)", id), Hint: "stop the bookie first"}
			}
		}
	}
	return nil
}

// CookieIDChange is what UpdateCookieBookieID did.
type CookieIDChange struct {
	OldID metadata.BookieID `json:"oldBookieId"`
	NewID metadata.BookieID `json:"newBookieId"`
	// Directories are the directories whose cookie file now names NewID.
	Directories []string `json:"directories"`
}

// UpdateCookieBookieID is `updatecookie -bookieId hostname|ip`: the bookie
// used to be known as oldID (the other choice of useHostNameAsBookieID) and
// is now newID (what cfg gives). It writes the cookie with newID into every
// directory (fsynced), stores it in the metadata store under newID, and
// deletes oldID's stored cookie (compare-and-set on the version read), in
// BookKeeper's order, so that a run interrupted anywhere can be run again:
// directories already carrying the new cookie are left as they are, and a
// stored new cookie equal to ours is kept. The ledgers still name oldID
// until `updateledgers` rewrites them.
func UpdateCookieBookieID(ctx context.Context, md metadata.Driver, cfg *Config, oldID, newID metadata.BookieID) (CookieIDChange, error) {
	res := CookieIDChange{OldID: oldID, NewID: newID, Directories: []string{}}
	if oldID == newID {
		return res, &CookieError{
			Why:  fmt.Sprintf("the configuration gives bookie id %s with either choice of useHostNameAsBookieID", newID),
			Hint: "advertisedAddress or bookieId fixes the id; change them, or the cookie, deliberately (`folio shell cookie update`)",
		}
	}
	if err := refuseRunning(ctx, md, oldID, newID); err != nil {
		return res, err
	}
	lock, err := LockCookies(cfg)
	if err != nil {
		return res, err
	}
	defer lock.Close()
	stored, oldVersion, err := md.ReadCookie(ctx, oldID)
	if errors.Is(err, metadata.ErrNoSuchCookie) {
		return res, &CookieError{
			Why:  fmt.Sprintf("the metadata store has no cookie for %s: the cookie was already updated to %s, or the bookie never ran as %s", oldID, newID, oldID),
			Hint: "check `folio shell cookie get " + string(newID) + "`",
		}
	}
	if err != nil {
		return res, fmt.Errorf("read the cookie of %s: %w", oldID, err)
	}
	oldCookie, err := metadata.ParseCookie(stored)
	if err != nil {
		return res, fmt.Errorf("the metadata store's cookie of %s (%s) is unreadable: %w", oldID, metadata.CookieKeyOf(md, oldID), err)
	}
	newCookie := *oldCookie
	newCookie.LayoutVersion = metadata.CookieLayoutVersion
	newCookie.BookieID = newID
	newBytes, err := newCookie.MarshalText()
	if err != nil {
		return res, err
	}
	for _, dir := range cfg.AllDirs() {
		c, err := readDirCookie(dir)
		if err != nil {
			return res, err
		}
		switch {
		case c == nil:
			return res, &CookieError{Why: fmt.Sprintf("%s has no cookie", dir), Hint: "run updatecookie with the configuration the bookie last ran with"}
		case cookiesMatch(c, &newCookie) == nil:
			continue // done by an earlier run
		case cookiesMatch(c, oldCookie) != nil:
			return res, &CookieError{
				Why:  fmt.Sprintf("the cookie in %s does not match %s's stored cookie (%v)", dir, oldID, cookiesMatch(c, oldCookie)),
				Hint: "run updatecookie with the configuration the bookie last ran with",
			}
		}
		if err := writeFileSync(filepath.Join(CurrentDir(dir), VersionFile), newBytes); err != nil {
			return res, fmt.Errorf("write the cookie to %s: %w", dir, err)
		}
		res.Directories = append(res.Directories, dir)
	}
	if _, err := md.WriteCookie(ctx, newID, newBytes, metadata.VersionNew); err != nil {
		if !errors.Is(err, metadata.ErrCookieExists) {
			return res, fmt.Errorf("store the cookie of %s: %w", newID, err)
		}
		cur, _, rerr := md.ReadCookie(ctx, newID)
		if rerr != nil {
			return res, fmt.Errorf("read the cookie of %s: %w", newID, rerr)
		}
		if !bytes.Equal(cur, newBytes) {
			return res, &CookieError{
				Why:  fmt.Sprintf("the metadata store already has a different cookie for %s", newID),
				Hint: "another bookie uses that id; inspect it with `folio shell cookie get " + string(newID) + "`",
			}
		}
	}
	if err := md.DeleteCookie(ctx, oldID, oldVersion); err != nil && !errors.Is(err, metadata.ErrNoSuchCookie) {
		return res, fmt.Errorf("delete the cookie of %s: %w", oldID, err)
	}
	return res, nil
}

// ExpandStorage is `updatecookie -expandstorage`, with the bookie stopped:
// BookKeeper's cookie validation with allowStorageExpansion=true
// (ValidateCookies). The configuration appends ledger (or index)
// directories to those of the bookie's cookie; every directory the cookie
// lists must carry it, every new one must be empty; the cookie with the
// configuration's directories is written into every directory, then
// replaces the stored one by compare-and-set. The storage takes the new
// directories at the bookie's next start (the cookie then lists them). A
// bookie the metadata store does not know is refused (start it instead).
// It returns the added directories (none when the cookie already lists
// every configured one: a repeated run) and those whose uncommitted
// expansion was rolled back.
func ExpandStorage(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID) (CookieResult, error) {
	if err := refuseRunning(ctx, md, id); err != nil {
		return CookieResult{}, err
	}
	lock, err := LockCookies(cfg)
	if err != nil {
		return CookieResult{}, err
	}
	defer lock.Close()
	if _, _, err := md.ReadCookie(ctx, id); errors.Is(err, metadata.ErrNoSuchCookie) {
		return CookieResult{}, &CookieError{Why: fmt.Sprintf("the metadata store has no cookie for %s", id), Hint: "a new bookie needs no expansion: start it"}
	} else if err != nil {
		return CookieResult{}, fmt.Errorf("read the cookie of %s: %w", id, err)
	}
	return ValidateCookies(ctx, md, cfg, id, CookieOptions{AllowExpansion: true})
}

// CookieFiles lists the VERSION files present in cfg's directories.
func CookieFiles(cfg *Config) ([]string, error) {
	var out []string
	for _, dir := range cfg.AllDirs() {
		p := filepath.Join(CurrentDir(dir), VersionFile)
		_, err := os.Stat(p)
		switch {
		case err == nil:
			out = append(out, p)
		case errors.Is(err, os.ErrNotExist):
		default:
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
	}
	return out, nil
}

// DeleteCookies is `updatecookie -delete`: it deletes the bookie's cookie
// files and its stored cookie (compare-and-set on the version read). The
// bookie's data stays; without a cookie it will refuse to start over it
// until formatted. It returns the files deleted and whether a stored
// cookie was deleted.
func DeleteCookies(ctx context.Context, md metadata.Driver, cfg *Config, id metadata.BookieID) ([]string, bool, error) {
	if err := refuseRunning(ctx, md, id); err != nil {
		return nil, false, err
	}
	lock, err := LockCookies(cfg)
	if err != nil {
		return nil, false, err
	}
	defer lock.Close()
	files, err := CookieFiles(cfg)
	if err != nil {
		return nil, false, err
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			return nil, false, fmt.Errorf("delete %s: %w", f, err)
		}
		if err := syncDir(filepath.Dir(f)); err != nil {
			return nil, false, err
		}
	}
	_, v, err := md.ReadCookie(ctx, id)
	if errors.Is(err, metadata.ErrNoSuchCookie) {
		return files, false, nil
	}
	if err != nil {
		return files, false, fmt.Errorf("read the cookie of %s: %w", id, err)
	}
	if err := md.DeleteCookie(ctx, id, v); err != nil {
		return files, false, fmt.Errorf("delete the cookie of %s: %w", id, err)
	}
	return files, true, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// CookieLockFile is the lock, in the first journal directory (beside
// current/, whose contents the cookie checks judge), that serialises
// everything that reads and rewrites a bookie's cookies: a bookie process
// holds it from before its cookie check for its whole life, and the
// offline cookie operations hold it while they run. Without it a start
// with the old directories could roll back the directory cookies of an
// expansion that then commits in the metadata store, leaving a bookie no
// configuration starts.
const CookieLockFile = "folio-cookies.lock"

// LockCookies takes the bookie's cookie lock (see CookieLockFile),
// creating the journal directory if needed. It fails at once, naming the
// file, if another process (or another bookie of this process) holds it:
// the bookie is running or another cookie operation is under way.
func LockCookies(cfg *Config) (io.Closer, error) {
	if len(cfg.JournalDirs) == 0 {
		return nil, errors.New("no journal directory configured")
	}
	dir := cfg.JournalDirs[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, CookieLockFile)
	l, err := vfs.Default.Lock(p)
	if err != nil {
		return nil, &CookieError{
			Why:  fmt.Sprintf("the cookie lock %s is held: the bookie is running, or another cookie operation is under way (%v)", p, err),
			Hint: "stop the bookie (or wait for the other operation) first",
		}
	}
	return l, nil
}
