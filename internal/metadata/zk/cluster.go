package zk

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// InitNewCluster creates the ledgers root's missing parents, then in one
// multi: the root, available/, available/readonly/, INSTANCEID (a new
// random UUID), LAYOUT (the configured manager, hierarchical by default),
// cookies/, underreplication/ and underreplication/LAYOUT. Java's
// initnewcluster creates the first five (its clients and bookies create
// the others when first needed, with the same content). As in Java, an
// existing root means an existing cluster: ErrClusterExists.
func (d *Driver) InitNewCluster(ctx context.Context) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	instanceID, err := newUUIDv4()
	if err != nil {
		return "", err
	}
	if st, err := d.conn.exists(ctx, d.p.root); err != nil {
		return "", d.storeErr("read "+d.p.root, err)
	} else if st != nil {
		return "", fmt.Errorf("cluster %s: %w (the ledgers root exists; use metaformat to wipe it)", d.p.root, metadata.ErrClusterExists)
	}
	if err := d.conn.ensurePath(ctx, path.Dir(d.p.root)); err != nil {
		return "", d.storeErr("create the parents of "+d.p.root, err)
	}
	m := d.cfg.Manager
	if m == 0 {
		m = Hierarchical
	}
	create := func(p string, data string) *gozk.CreateRequest {
		var b []byte
		if data != "" {
			b = []byte(data)
		}
		return &gozk.CreateRequest{Path: p, Data: b, Acl: openACL, Flags: gozk.FlagPersistent}
	}
	_, err = d.conn.multi(ctx,
		create(d.p.root, ""),
		create(d.p.available, ""),
		create(d.p.readonly, ""),
		create(d.p.instanceID, instanceID),
		create(d.p.layout, m.LayoutValue()),
		create(d.p.cookies, ""),
		create(d.p.ur, ""),
		create(d.p.urLayout, URLayoutValue),
	)
	if errors.Is(err, gozk.ErrNodeExists) {
		return "", fmt.Errorf("cluster %s: %w (created meanwhile)", d.p.root, metadata.ErrClusterExists)
	}
	if err != nil {
		return "", d.storeErr("initialise cluster "+d.p.root, err)
	}
	d.mu.Lock()
	d.mu.manager, d.mu.urReady, d.mu.longIDs = m, false, false
	d.mu.Unlock()
	return instanceID, nil
}

// Format wipes the cluster and initialises a new one (`metaformat`).
// Without force an existing cluster is ErrClusterExists; with or without
// force it refuses with ErrBookiesRegistered while any bookie is
// registered (writable or read-only). Like Java's nuke, it refuses to
// delete a root that holds znodes that are neither BookKeeper's nor ledger
// trees (a wrong root path), naming them. A bookie registering during the
// wipe makes it fail with ErrBookiesRegistered.
func (d *Driver) Format(ctx context.Context, force bool) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	if registered, err := d.registeredBookies(ctx); err != nil {
		return "", err
	} else if len(registered) > 0 {
		return "", fmt.Errorf("format %s: %w: %s (stop those bookies, or wait for their sessions to expire)", d.p.root, metadata.ErrBookiesRegistered, strings.Join(registered, ", "))
	}
	top, err := d.conn.children(ctx, d.p.root)
	if errors.Is(err, gozk.ErrNoNode) {
		return d.InitNewCluster(ctx)
	}
	if err != nil {
		return "", d.storeErr("list "+d.p.root, err)
	}
	if !force {
		return "", fmt.Errorf("format %s: %w (use force to wipe it)", d.p.root, metadata.ErrClusterExists)
	}
	m, err := d.manager(ctx)
	if err != nil && !errors.Is(err, metadata.ErrCorruptMetadata) {
		return "", err
	}
	var unexpected []string
	for _, name := range top {
		if !isSpecialNode(name) && !(m != 0 && m.isLedgerParent(name)) && !Hierarchical.isLedgerParent(name) && !Flat.isLedgerParent(name) {
			unexpected = append(unexpected, d.p.root+"/"+name)
		}
	}
	if len(unexpected) > 0 {
		return "", fmt.Errorf("format %s: refusing to delete znodes that are not BookKeeper's: %s (is the ledgers root right?)", d.p.root, strings.Join(unexpected, ", "))
	}
	if err := d.deleteTree(ctx, d.p.root); err != nil {
		if errors.Is(err, gozk.ErrNotEmpty) {
			return "", fmt.Errorf("format %s: %w (a bookie registered during the wipe)", d.p.root, metadata.ErrBookiesRegistered)
		}
		return "", d.storeErr("wipe "+d.p.root, err)
	}
	d.mu.Lock()
	d.mu.manager, d.mu.urReady, d.mu.longIDs = 0, false, false
	d.mu.Unlock()
	return d.InitNewCluster(ctx)
}

// registeredBookies lists the registration znodes (writable and read-only).
func (d *Driver) registeredBookies(ctx context.Context) ([]string, error) {
	var out []string
	for _, dir := range []string{d.p.available, d.p.readonly} {
		names, err := d.conn.children(ctx, dir)
		if errors.Is(err, gozk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, d.storeErr("list "+dir, err)
		}
		for _, n := range names {
			if dir == d.p.available && n == readonlyNode {
				continue
			}
			out = append(out, dir+"/"+n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// deleteTree deletes p and everything below it, children first, siblings
// in multis of up to 500 deletes.
func (d *Driver) deleteTree(ctx context.Context, p string) error {
	names, err := d.conn.children(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	var batch []any
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := d.conn.multi(ctx, batch...)
		batch = batch[:0]
		if errors.Is(err, gozk.ErrNoNode) {
			return nil // deleted meanwhile: the next pass finds what is left
		}
		return err
	}
	for _, n := range names {
		child := p + "/" + n
		st, err := d.conn.exists(ctx, child)
		if err != nil {
			return err
		}
		if st == nil {
			continue
		}
		if st.NumChildren > 0 {
			if err := d.deleteTree(ctx, child); err != nil {
				return err
			}
			continue
		}
		batch = append(batch, &gozk.DeleteRequest{Path: child, Version: -1})
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	err = d.conn.delete(ctx, p, -1)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	return err
}

// ReadInstanceID reads INSTANCEID; ErrNoCluster if absent.
func (d *Driver) ReadInstanceID(ctx context.Context) (string, error) {
	v, err := d.readClusterNode(ctx, d.p.instanceID)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", metadata.Corrupt(d.p.instanceID, fmt.Errorf("empty instance id"))
	}
	return v, nil
}

// ReadLayout reads LAYOUT as stored; ErrNoCluster if absent.
func (d *Driver) ReadLayout(ctx context.Context) (string, error) {
	return d.readClusterNode(ctx, d.p.layout)
}

func (d *Driver) readClusterNode(ctx context.Context, p string) (string, error) {
	if err := d.checkOpen(); err != nil {
		return "", err
	}
	b, _, err := d.conn.get(ctx, p)
	if errors.Is(err, gozk.ErrNoNode) {
		return "", fmt.Errorf("%s: %w (znode %s absent; run `folio shell initnewcluster`)", d.p.root, metadata.ErrNoCluster, p)
	}
	if err != nil {
		return "", d.storeErr("read "+p, err)
	}
	return string(b), nil
}

// newUUIDv4 returns a random (version 4) UUID in Java's UUID.toString form.
func newUUIDv4() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
