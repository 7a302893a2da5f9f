package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/foliodb/folio/internal/metadata"
)

// paths are the znodes of one cluster (doc.go lists them).
type paths struct {
	root                  string
	layout, instanceID    string
	available, readonly   string
	cookies               string
	idgen, idgenLong      string
	ur, urLayout          string
	urLedgers, urLocks    string
	urElection, urDisable string
	urDelay               string
	disableHealthCheck    string
}

// Under-replication node names (Java's BookKeeperConstants and
// ZkLedgerAuditorManager).
const (
	urLedgersNode  = "ledgers"
	urLocksNode    = "locks"
	urElectionNode = "auditorelection"
	urDisableNode  = "disable"
	urDelayNode    = "lostBookieRecoveryDelay"
	// URLayoutValue is `underreplication/LAYOUT`: the TextFormat of
	// LedgerRereplicationLayoutFormat{type "BASIC", version 1}, as Java's
	// ZkLedgerUnderreplicationManager writes it.
	URLayoutValue = "type: \"BASIC\"\nversion: 1\n"
)

func newPaths(root string) paths {
	p := paths{root: root}
	p.layout = root + "/" + layoutNode
	p.instanceID = root + "/" + instanceIDNode
	p.available = root + "/" + availableNode
	p.readonly = p.available + "/" + readonlyNode
	p.cookies = root + "/" + cookiesNode
	p.idgen = root + "/" + idgenNode
	p.idgenLong = root + "/" + idgenLongNode
	p.ur = root + "/" + underReplicationNode
	p.urLayout = p.ur + "/" + layoutNode
	p.urLedgers = p.ur + "/" + urLedgersNode
	p.urLocks = p.ur + "/" + urLocksNode
	p.urElection = p.ur + "/" + urElectionNode
	p.urDisable = p.ur + "/" + urDisableNode
	p.urDelay = p.ur + "/" + urDelayNode
	p.disableHealthCheck = root + "/" + disableHealthCheckNode
	return p
}

func (p paths) cookie(id metadata.BookieID) string { return p.cookies + "/" + string(id) }

func (p paths) registration(id metadata.BookieID, readOnly bool) string {
	if readOnly {
		return p.readonly + "/" + string(id)
	}
	return p.available + "/" + string(id)
}

// urRecordDir is the record's parent: the id's four 16-bit groups in
// lowercase hex (ZkLedgerUnderreplicationManager.getParentZnodePath).
func (p paths) urRecordDir(id int64) string {
	u := uint64(id)
	return fmt.Sprintf("%s/%04x/%04x/%04x/%04x", p.urLedgers, u>>48&0xffff, u>>32&0xffff, u>>16&0xffff, u&0xffff)
}

// urRecord is `underreplication/ledgers/hhhh/hhhh/hhhh/hhhh/urL%010d`.
func (p paths) urRecord(id int64) string { return fmt.Sprintf("%s/urL%010d", p.urRecordDir(id), id) }

// urLock is `underreplication/locks/urL%010d`.
func (p paths) urLock(id int64) string { return fmt.Sprintf("%s/urL%010d", p.urLocks, id) }

func (p paths) urCheckTime(c metadata.PeriodicCheck) string { return p.ur + "/" + c.Node() }

// manager returns the cluster's ledger manager: the one LAYOUT names, else
// the configured one (Hierarchical by default), whose LAYOUT it then writes
// as Java's clients do (create if absent; a racing writer's LAYOUT must
// agree). A LAYOUT that does not parse, or that names a manager other than
// the configured one, is an error naming the znode. The answer is cached
// once LAYOUT has been read or written.
func (d *Driver) manager(ctx context.Context) (Manager, error) {
	d.mu.Lock()
	m := d.mu.manager
	d.mu.Unlock()
	if m != 0 {
		return m, nil
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		b, _, err := d.conn.get(ctx, d.p.layout)
		if err == nil {
			stored, err := ParseLayout(b)
			if err != nil {
				return 0, metadata.Corrupt(d.p.layout, err)
			}
			if d.cfg.Manager != 0 && d.cfg.Manager != stored {
				return 0, fmt.Errorf("zookeeper: %s names the %s ledger manager (%s), the URI zk+%s (%s): use zk://… or zk+%s://…",
					d.p.layout, stored, stored.FactoryClass(), d.cfg.Manager, d.cfg.Manager.FactoryClass(), stored)
			}
			d.mu.Lock()
			d.mu.manager = stored
			d.mu.Unlock()
			return stored, nil
		}
		if !errors.Is(err, gozk.ErrNoNode) {
			return 0, d.storeErr("read "+d.p.layout, err)
		}
		m = d.cfg.Manager
		if m == 0 {
			m = Hierarchical
		}
		_, err = d.conn.create(ctx, d.p.layout, []byte(m.LayoutValue()), gozk.FlagPersistent)
		switch {
		case err == nil:
			d.mu.Lock()
			d.mu.manager = m
			d.mu.Unlock()
			return m, nil
		case errors.Is(err, gozk.ErrNoNode):
			// No root yet (the cluster is not initialised): use the
			// manager without storing it; InitNewCluster writes LAYOUT.
			return m, nil
		case errors.Is(err, gozk.ErrNodeExists):
			continue // someone else wrote it: read theirs
		default:
			return 0, d.storeErr("write "+d.p.layout, err)
		}
	}
	return 0, fmt.Errorf("zookeeper: %s keeps changing", d.p.layout)
}
