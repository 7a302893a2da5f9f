package etcd

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/foliodb/folio/internal/metadata"
)

// InitNewCluster writes every placeholder key, the layout and a new instance
// id in one txn guarded by `create_revision(<scope>) == 0`, as Java's
// EtcdRegistrationManager.initNewCluster does. ErrClusterExists if the scope
// key exists.
func (d *Driver) InitNewCluster(ctx context.Context) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	instanceID, err := newUUIDv4()
	if err != nil {
		return "", err
	}
	var puts []clientv3.Op
	for _, key := range d.k.placeholders() {
		value := ""
		switch key {
		case d.k.layout:
			value = LayoutValue
		case d.k.instanceID:
			value = instanceID
		}
		puts = append(puts, clientv3.OpPut(key, value))
	}
	what := "initialise cluster " + d.k.scope
	err = d.do(ctx, what, func(ctx context.Context, retried bool) error {
		resp, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(d.k.scope), "=", 0)).
			Then(puts...).
			Else(clientv3.OpGet(d.k.instanceID)).
			Commit()
		if err != nil {
			return d.storeErr(what, err)
		}
		if resp.Succeeded {
			return nil
		}
		if cur := firstKV(resp, 0); retried && cur != nil && string(cur.Value) == instanceID {
			return nil // our earlier attempt initialised it: the instance id is ours
		}
		return fmt.Errorf("cluster %s: %w (key %q exists; use metaformat to wipe it)", d.k.scope, metadata.ErrClusterExists, d.k.scope)
	})
	if err != nil {
		return "", err
	}
	return instanceID, nil
}

// Format wipes the scope and initialises a new cluster. Without force an
// existing cluster is ErrClusterExists; with or without force it refuses
// with ErrBookiesRegistered while any key other than the placeholders
// exists in [<scope>/bookies, <scope>/bookies0) (Java's check; the range
// starts at the bare key so that it also catches siblings like
// `<scope>/bookies-x`).
//
// The wipe deletes the key `<scope>` and every key under `<scope>/`. Java's
// nuke deletes [<scope>, <scope>0), which also deletes sibling clusters such
// as `<scope>-x` or `<scope>.x` (spec/metadata.md §2.2 pitfall); Folio does
// not. The check and the wipe are one txn: it fails if a registration
// appeared or changed after the check, and Format checks again.
func (d *Driver) Format(ctx context.Context, force bool) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	what := "format " + d.k.scope
	for {
		var resp *clientv3.TxnResponse
		err := d.do(ctx, what, func(ctx context.Context, _ bool) error {
			r, err := d.cli.Txn(ctx).Then(
				clientv3.OpGet(d.k.scope, clientv3.WithCountOnly()),
				clientv3.OpGet(d.k.bookies, clientv3.WithRange(prefixEnd(d.k.bookies)), clientv3.WithKeysOnly()),
			).Commit()
			if err != nil {
				return d.storeErr(what, err)
			}
			resp = r
			return nil
		})
		if err != nil {
			return "", err
		}
		exists := resp.Responses[0].GetResponseRange().GetCount() > 0
		var registered []string
		for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
			switch key := string(kv.Key); key {
			case d.k.bookies, d.k.writable, d.k.readonly:
			default:
				registered = append(registered, key)
			}
		}
		if len(registered) > 0 {
			return "", fmt.Errorf("format %s: %w: %s (stop those bookies, or wait for their leases to expire)", d.k.scope, metadata.ErrBookiesRegistered, strings.Join(registered, ", "))
		}
		if !exists {
			return d.InitNewCluster(ctx)
		}
		if !force {
			return "", fmt.Errorf("format %s: %w (use force to wipe it)", d.k.scope, metadata.ErrClusterExists)
		}
		// Nothing in the bookies range may have been created or changed
		// since the read above: every key there has mod_revision ≤ rev. A
		// retried wipe is harmless: its condition still holds, and it
		// deletes whatever is left.
		rev := resp.Header.Revision
		var wiped bool
		err = d.do(ctx, what, func(ctx context.Context, _ bool) error {
			wipe, err := d.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(d.k.bookies), "<", rev+1).WithRange(prefixEnd(d.k.bookies))).
				Then(clientv3.OpDelete(d.k.scope), clientv3.OpDelete(d.k.scope+"/", clientv3.WithRange(prefixEnd(d.k.scope)))).
				Commit()
			if err != nil {
				return d.storeErr(what, err)
			}
			wiped = wipe.Succeeded
			return nil
		})
		if err != nil {
			return "", err
		}
		if !wiped {
			continue // a bookie registered meanwhile: check again
		}
		return d.InitNewCluster(ctx)
	}
}

// ReadInstanceID reads `<scope>/instanceid`.
func (d *Driver) ReadInstanceID(ctx context.Context) (string, error) {
	v, err := d.readClusterKey(ctx, d.k.instanceID)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", metadata.Corrupt(d.k.instanceID, fmt.Errorf("empty instance id"))
	}
	return v, nil
}

// ReadLayout reads `<scope>/layout`.
func (d *Driver) ReadLayout(ctx context.Context) (string, error) {
	return d.readClusterKey(ctx, d.k.layout)
}

func (d *Driver) readClusterKey(ctx context.Context, key string) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	resp, err := d.get(ctx, "read "+key, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("%s: %w (key %q absent; run `folio shell initnewcluster`)", d.k.scope, metadata.ErrNoCluster, key)
	}
	return string(resp.Kvs[0].Value), nil
}

// newUUIDv4 returns a random (version 4, RFC 4122 variant) UUID in Java's
// UUID.toString form: lowercase 8-4-4-4-12 hex.
func newUUIDv4() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
