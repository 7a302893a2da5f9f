package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// CookieKey is the znode of id's cookie (metadata.CookieLocator).
func (d *Driver) CookieKey(id metadata.BookieID) string { return d.p.cookie(id) }

// ReadCookie reads `cookies/<id>`; the version is its mzxid.
func (d *Driver) ReadCookie(ctx context.Context, id metadata.BookieID) ([]byte, metadata.Version, error) {
	if err := checkBookieID(id); err != nil {
		return nil, 0, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, 0, err
	}
	p := d.p.cookie(id)
	b, st, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, 0, fmt.Errorf("bookie %s (%s): %w", id, p, metadata.ErrNoSuchCookie)
	}
	if err != nil {
		return nil, 0, d.storeErr("read cookie "+p, err)
	}
	return b, version(st), nil
}

// WriteCookie creates the cookie (expected == VersionNew; cookies/ is
// created if missing, as Java does) or compare-and-sets it.
func (d *Driver) WriteCookie(ctx context.Context, id metadata.BookieID, data []byte, expected metadata.Version) (metadata.Version, error) {
	if err := checkBookieID(id); err != nil {
		return 0, err
	}
	if expected != metadata.VersionNew {
		if err := checkExpected(expected); err != nil {
			return 0, err
		}
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	p := d.p.cookie(id)
	what := fmt.Sprintf("cookie of bookie %s (%s)", id, p)
	if expected == metadata.VersionNew {
		st, err := d.conn.createFullWithStat(ctx, p, data, gozk.FlagPersistent)
		if errors.Is(err, gozk.ErrNodeExists) {
			return 0, fmt.Errorf("%s: %w", what, metadata.ErrCookieExists)
		}
		if err != nil {
			return 0, d.storeErr("create "+what, err)
		}
		return version(st), nil
	}
	st, err := d.casSet(ctx, what, p, data, expected, metadata.ErrNoSuchCookie)
	if err != nil {
		return 0, err
	}
	return version(st), nil
}

// DeleteCookie deletes the cookie if its version is expected (any version
// with VersionAny).
func (d *Driver) DeleteCookie(ctx context.Context, id metadata.BookieID, expected metadata.Version) error {
	if err := checkBookieID(id); err != nil {
		return err
	}
	if expected != metadata.VersionAny {
		if err := checkExpected(expected); err != nil {
			return err
		}
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	p := d.p.cookie(id)
	return d.casDelete(ctx, fmt.Sprintf("cookie of bookie %s (%s)", id, p), p, expected, metadata.ErrNoSuchCookie)
}

// ListCookies lists the children of cookies/ (Java's getAllBookies). A
// child that is not a valid bookie id fails the call, naming it.
func (d *Driver) ListCookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.p.cookies, "")
}

// listIDs lists the bookie ids that are children of dir, ascending, leaving
// out the child named skip.
func (d *Driver) listIDs(ctx context.Context, dir, skip string) ([]metadata.BookieID, error) {
	names, err := d.conn.children(ctx, dir)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, d.storeErr("list "+dir, err)
	}
	return idsOf(dir, names, skip)
}

func idsOf(dir string, names []string, skip string) ([]metadata.BookieID, error) {
	var ids []metadata.BookieID
	for _, n := range names {
		if n == skip {
			continue
		}
		id := metadata.BookieID(n)
		if err := metadata.ValidateBookieID(id); err != nil {
			return nil, metadata.Corrupt(dir+"/"+n, err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}
