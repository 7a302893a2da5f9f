package server

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/memory"
)

const cookieTestID = metadata.BookieID("127.0.0.1:3181")

// cookieBookie is a bookie with data for the cookie tests: a journal and
// one ledger directory stamped by a first start, a data file in each, on a
// memory metadata store. grown is its configuration with a second ledger
// directory appended.
type cookieBookie struct {
	md          metadata.Driver
	cfg, grown  Config
	added, root string
}

func newCookieBookie(t *testing.T) *cookieBookie {
	t.Helper()
	ctx := context.Background()
	md := memory.NewStore(memory.Options{}).Open()
	t.Cleanup(func() { md.Close() })
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfg := DefaultConfig()
	cfg.JournalDirs = []string{filepath.Join(root, "journal")}
	cfg.LedgerDirs = []string{filepath.Join(root, "ledgers0")}
	res, err := ValidateCookies(ctx, md, &cfg, cookieTestID, CookieOptions{})
	if err != nil || !res.Created {
		t.Fatalf("first start: %+v %v", res, err)
	}
	for _, d := range cfg.AllDirs() {
		if err := os.WriteFile(filepath.Join(CurrentDir(d), "data"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &cookieBookie{md: md, cfg: cfg, grown: cfg, root: root, added: filepath.Join(root, "ledgers1")}
	b.grown.LedgerDirs = []string{cfg.LedgerDirs[0], b.added}
	return b
}

// stored returns the metadata store's cookie.
func (b *cookieBookie) stored(t *testing.T) *metadata.Cookie {
	t.Helper()
	data, _, err := b.md.ReadCookie(context.Background(), cookieTestID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := metadata.ParseCookie(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantCookies fails unless the store and every directory of cfg carry the
// cookie with cfg's directories.
func (b *cookieBookie) wantCookies(t *testing.T, cfg *Config) {
	t.Helper()
	data, _, err := b.md.ReadCookie(context.Background(), cookieTestID)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.stored(t); !slices.Equal(s.LedgerDirs, cfg.LedgerDirs) {
		t.Fatalf("stored cookie lists %v, want %v", s.LedgerDirs, cfg.LedgerDirs)
	}
	for _, d := range cfg.AllDirs() {
		local, err := os.ReadFile(filepath.Join(CurrentDir(d), VersionFile))
		if err != nil || !bytes.Equal(local, data) {
			t.Fatalf("cookie of %s: %q %v, want the stored one", d, local, err)
		}
	}
}

// crashAt returns a beforeWrite hook failing at the n-th write (from 0) and
// counting writes in *count.
func crashAt(n int, count *int) func(string) error {
	return func(string) error {
		if *count == n {
			return errors.New("injected crash")
		}
		*count++
		return nil
	}
}

// TestCookieExpansion: allowStorageExpansion's cookie check. Without the
// key the added directory is refused naming the key and nothing is
// written; with it the new directory is stamped, the others rewritten and
// the store's cookie replaced (CAS); a repeated check changes nothing; the
// configuration of before is then refused (a directory cannot be removed).
func TestCookieExpansion(t *testing.T) {
	ctx := context.Background()
	b := newCookieBookie(t)
	_, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{})
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "allowStorageExpansion") || !strings.Contains(err.Error(), b.added) {
		t.Fatalf("without the key: %v, want a cookie error naming allowStorageExpansion and %s", err, b.added)
	}
	if _, err := os.Stat(filepath.Join(CurrentDir(b.added), VersionFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused check wrote a cookie into the new directory: %v", err)
	}
	b.wantCookies(t, &b.cfg)

	res, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: true})
	if err != nil || res.Created || !slices.Equal(res.Added, []string{b.added}) {
		t.Fatalf("expansion: %+v %v", res, err)
	}
	b.wantCookies(t, &b.grown)
	_, v1, _ := b.md.ReadCookie(ctx, cookieTestID)
	for _, allow := range []bool{false, true} {
		res, err = ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: allow})
		if err != nil || len(res.Added) != 0 || len(res.RolledBack) != 0 {
			t.Fatalf("check after the expansion (allow %v): %+v %v", allow, res, err)
		}
	}
	if _, v2, _ := b.md.ReadCookie(ctx, cookieTestID); v2 != v1 {
		t.Fatal("a check with nothing to add rewrote the stored cookie")
	}
	_, err = ValidateCookies(ctx, b.md, &b.cfg, cookieTestID, CookieOptions{AllowExpansion: true})
	if !errors.As(err, &ce) || !strings.Contains(ce.Why, "lacks directories "+b.added) {
		t.Fatalf("the configuration of before after the expansion: %v, want a refusal naming %s", err, b.added)
	}
}

// TestCookieExpansionRefusals: what an expansion does not accept, each
// refused before anything is written: a new directory with data, a new
// directory with another bookie's cookie, ledger directories reordered,
// a directory removed, the journal directories changed. ROOT in a wanted
// message stands for the bookie's temporary directory.
func TestCookieExpansionRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, b *cookieBookie) Config
		want  string
	}{
		{"new directory with data", func(t *testing.T, b *cookieBookie) Config {
			mustWrite(t, filepath.Join(CurrentDir(b.added), "LAYOUT"), "x")
			return b.grown
		}, "must be empty"},
		{"new directory of another bookie", func(t *testing.T, b *cookieBookie) Config {
			other := MasterCookie(&b.grown, "10.0.0.9:3181", "")
			data, _ := other.MarshalText()
			mustWrite(t, filepath.Join(CurrentDir(b.added), VersionFile), string(data))
			return b.grown
		}, "does not match this bookie"},
		{"reordered", func(t *testing.T, b *cookieBookie) Config {
			c := b.grown
			c.LedgerDirs = []string{b.added, b.cfg.LedgerDirs[0]}
			return c
		}, "do not start with the ledger directories"},
		{"removed", func(t *testing.T, b *cookieBookie) Config {
			c := b.cfg
			c.LedgerDirs = []string{b.added}
			return c
		}, "lacks directories " + filepath.Join("ROOT", "ledgers0")},
		{"journal changed", func(t *testing.T, b *cookieBookie) Config {
			c := b.grown
			c.JournalDirs = []string{filepath.Join(b.root, "journal2")}
			return c
		}, "does not match this bookie's configuration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newCookieBookie(t)
			cfg := tc.setup(t, b)
			_, err := ValidateCookies(ctx, b.md, &cfg, cookieTestID, CookieOptions{AllowExpansion: true})
			var ce *CookieError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), strings.ReplaceAll(tc.want, "ROOT", b.root)) {
				t.Fatalf("%v, want a cookie error with %q", err, tc.want)
			}
			b.wantCookies(t, &b.cfg)
		})
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCookieExpansionCrashAtEveryWrite stops an expansion before each of
// its writes (the new directory's cookie, the other directories', the
// store's) as a crash would, with a half-written temporary cookie file
// left in the new directory, and checks that the next check accepts both
// configurations: the grown one completes the expansion; the one of
// before (the store never committed the expansion) rolls the directories'
// cookies back. A concurrent writer of the stored cookie fails the
// expansion's compare-and-set.
func TestCookieExpansionCrashAtEveryWrite(t *testing.T) {
	ctx := context.Background()
	writes := 0
	b := newCookieBookie(t)
	if _, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: true, beforeWrite: crashAt(-1, &writes)}); err != nil {
		t.Fatal(err)
	}
	if writes != 4 { // ledgers1, journal, ledgers0, the store
		t.Fatalf("%d writes in an expansion, want 4", writes)
	}
	for crash := range writes {
		for _, next := range []string{"grown", "before"} {
			b := newCookieBookie(t)
			n := 0
			_, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: true, beforeWrite: crashAt(crash, &n)})
			if err == nil || !strings.Contains(err.Error(), "injected crash") {
				t.Fatalf("crash at write %d: %v", crash, err)
			}
			mustWrite(t, filepath.Join(CurrentDir(b.added), cookieTempPrefix+"12345"), "half")
			if next == "grown" {
				res, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: true})
				if err != nil || !slices.Equal(res.Added, []string{b.added}) {
					t.Fatalf("crash at write %d, then the grown configuration: %+v %v", crash, res, err)
				}
				b.wantCookies(t, &b.grown)
				continue
			}
			res, err := ValidateCookies(ctx, b.md, &b.cfg, cookieTestID, CookieOptions{})
			if err != nil || len(res.Added) != 0 {
				t.Fatalf("crash at write %d, then the configuration of before: %+v %v", crash, res, err)
			}
			// Writes 1 and 2 rewrite the journal's and ledgers0's cookies:
			// a crash after them leaves those to roll back.
			if want := min(max(crash-1, 0), 2); len(res.RolledBack) != want {
				t.Fatalf("crash at write %d: rolled back %v, want %d directories", crash, res.RolledBack, want)
			}
			b.wantCookies(t, &b.cfg)
		}
	}

	// A concurrent writer of the stored cookie between the read and the
	// compare-and-set.
	b = newCookieBookie(t)
	race := func(path string) error {
		if path == "" {
			data, v, err := b.md.ReadCookie(ctx, cookieTestID)
			if err != nil {
				return err
			}
			_, err = b.md.WriteCookie(ctx, cookieTestID, data, v)
			return err
		}
		return nil
	}
	_, err := ValidateCookies(ctx, b.md, &b.grown, cookieTestID, CookieOptions{AllowExpansion: true, beforeWrite: race})
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(ce.Why, "changed while this bookie was adding directories") {
		t.Fatalf("a concurrent write of the stored cookie: %v", err)
	}
	if s := b.stored(t); !slices.Equal(s.LedgerDirs, b.cfg.LedgerDirs) {
		t.Fatalf("the losing expansion changed the stored cookie: %v", s.LedgerDirs)
	}
}

// TestCookieExpansionIndexDirs: index directories (stamped, unused by
// Folio's storage) follow BookKeeper's superset rule: an added one is
// accepted in any position; a removed one is refused.
func TestCookieExpansionIndexDirs(t *testing.T) {
	ctx := context.Background()
	md := memory.NewStore(memory.Options{}).Open()
	defer md.Close()
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfg := DefaultConfig()
	cfg.JournalDirs = []string{filepath.Join(root, "journal")}
	cfg.LedgerDirs = []string{filepath.Join(root, "ledgers")}
	cfg.IndexDirs = []string{filepath.Join(root, "index0")}
	if _, err := ValidateCookies(ctx, md, &cfg, cookieTestID, CookieOptions{}); err != nil {
		t.Fatal(err)
	}
	grown := cfg
	grown.IndexDirs = []string{filepath.Join(root, "index1"), cfg.IndexDirs[0]}
	res, err := ValidateCookies(ctx, md, &grown, cookieTestID, CookieOptions{AllowExpansion: true})
	if err != nil || !slices.Equal(res.Added, grown.IndexDirs[:1]) {
		t.Fatalf("index directory added first: %+v %v", res, err)
	}
	b := &cookieBookie{md: md}
	b.wantCookies(t, &grown)
	if s := b.stored(t); !slices.Equal(s.IndexDirs, grown.IndexDirs) {
		t.Fatalf("stored cookie's index directories %v, want %v", s.IndexDirs, grown.IndexDirs)
	}
	shrunk := grown
	shrunk.IndexDirs = grown.IndexDirs[:1]
	_, err = ValidateCookies(ctx, md, &shrunk, cookieTestID, CookieOptions{AllowExpansion: true})
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(ce.Why, "lacks directories "+cfg.IndexDirs[0]) {
		t.Fatalf("index directory removed: %v", err)
	}
}
