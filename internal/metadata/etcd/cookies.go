package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
)

// CookieKey is the key of id's cookie (metadata.CookieLocator).
func (d *Driver) CookieKey(id metadata.BookieID) string { return d.k.cookie(id) }

// ReadCookie reads `cookies/<id>`; the version is its mod_revision.
func (d *Driver) ReadCookie(ctx context.Context, id metadata.BookieID) ([]byte, metadata.Version, error) {
	if err := checkBookieID(id); err != nil {
		return nil, 0, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, 0, err
	}
	key := d.k.cookie(id)
	resp, err := d.get(ctx, "read cookie "+key, key)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("bookie %s (%s): %w", id, key, metadata.ErrNoSuchCookie)
	}
	return resp.Kvs[0].Value, metadata.Version(resp.Kvs[0].ModRevision), nil
}

// WriteCookie creates (expected == VersionNew: `if create_revision == 0`)
// or compare-and-sets (`if mod_revision == expected`) the cookie.
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
	key := d.k.cookie(id)
	what := fmt.Sprintf("cookie of bookie %s (%s)", id, key)
	if expected != metadata.VersionNew {
		return d.casPut(ctx, what, key, data, expected, metadata.ErrNoSuchCookie)
	}
	return d.create(ctx, "write "+what, key, data, fmt.Errorf("%s: %w", what, metadata.ErrCookieExists))
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
	key := d.k.cookie(id)
	return d.casDelete(ctx, fmt.Sprintf("cookie of bookie %s (%s)", id, key), key, expected, metadata.ErrNoSuchCookie)
}

// ListCookies lists the keys under `cookies/`. A key whose last part is not
// a valid bookie id fails the call, naming the key.
func (d *Driver) ListCookies(ctx context.Context) ([]metadata.BookieID, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.listIDs(ctx, d.k.cookies)
}

// listIDs lists the bookie ids under dir + "/", ascending.
func (d *Driver) listIDs(ctx context.Context, dir string) ([]metadata.BookieID, error) {
	prefix := dir + "/"
	resp, err := d.get(ctx, "list "+prefix, prefix, clientv3.WithRange(prefixEnd(dir)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return idsOf(prefix, resp.Kvs)
}
