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
	resp, err := d.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, d.storeErr("read cookie "+key, err)
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
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", int64(expected))
	if expected == metadata.VersionNew {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	resp, err := d.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return 0, d.storeErr("write "+what, err)
	}
	if !resp.Succeeded {
		if expected == metadata.VersionNew {
			return 0, fmt.Errorf("%s: %w", what, metadata.ErrCookieExists)
		}
		return 0, d.casFailure(what, resp, expected, metadata.ErrNoSuchCookie)
	}
	return metadata.Version(resp.Header.Revision), nil
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
	resp, err := d.cli.Get(ctx, prefix, clientv3.WithRange(prefixEnd(dir)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, d.storeErr("list "+prefix, err)
	}
	return idsOf(prefix, resp.Kvs)
}
