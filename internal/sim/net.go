package sim

import (
	"math/rand/v2"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/wire"
)

// network is the simulated network between clients (actors) and bookies.
// Each (client, bookie) pair has one connection, FIFO in each direction:
// a message is delivered no earlier than the one sent before it on the
// same connection, while different connections reorder freely. A reset
// bumps the connection's epoch: whatever is in flight on it is dropped and
// the client's requests on it fail at once, as a transport's would on a
// lost connection. Partitions drop messages at send and at delivery. Loss
// drops one message (the request's timeout then fires): it models a
// request or reply that never made it, the case the TLA+ model's lost
// fence request needs.
type network struct {
	w     *world
	conns map[connKey]*conn
	// cut holds partitioned pairs; isolated bookies are cut from everyone.
	cut      map[connKey]bool
	isolated map[metadata.BookieID]bool
}

type connKey struct {
	client string
	bookie metadata.BookieID
}

type conn struct {
	epoch int
	// base is the link's one-way delay; lastOut/lastBack the delivery times
	// of the latest request and reply (FIFO).
	base              time.Duration
	lastOut, lastBack time.Duration
	// slow is extra delay while the link is congested (FaultDelay).
	slow time.Duration
	// loseNext drops the next request sent on the link (a targeted loss,
	// see raceRecovery).
	loseNext bool
	// dropAdds drops the next dropAdds add requests sent on the link, or
	// every one while negative (targeted losses, see recoveryStorm).
	dropAdds int
	// failAdds fails every add request sent on the link at once, as a
	// client whose connection attempt is refused sees it, without the
	// bookie storing anything.
	failAdds bool
	// rng is the link's own random stream (delays, losses).
	rng *rand.Rand
}

func newNetwork(w *world) *network {
	return &network{w: w, conns: map[connKey]*conn{}, cut: map[connKey]bool{}, isolated: map[metadata.BookieID]bool{}}
}

func (nw *network) conn(client string, b metadata.BookieID) *conn {
	k := connKey{client, b}
	c := nw.conns[k]
	if c == nil {
		r := nw.w.stream("conn/" + nw.w.actorKeys[client] + "/" + string(b))
		c = &conn{base: between(r, 100*time.Microsecond, 2*time.Millisecond), rng: r}
		nw.conns[k] = c
	}
	return c
}

func (nw *network) partitioned(client string, b metadata.BookieID) bool {
	return nw.isolated[b] || nw.cut[connKey{client, b}]
}

// delay draws one message's delay on c.
func (nw *network) delay(c *conn) time.Duration {
	w := nw.w
	d := c.base + between(c.rng, 0, time.Millisecond)
	if w.phase == "safety" {
		d += c.slow // set by delay faults and targeted workloads only
	}
	if w.faults[FaultDelay] && w.phase == "safety" {
		if w.faultChanceOn(c.rng, FaultDelay, 60) {
			d += between(c.rng, 10*time.Millisecond, 200*time.Millisecond)
		}
	}
	return d
}

func (nw *network) lose(c *conn) bool {
	return nw.w.faultChanceOn(c.rng, FaultLoss, 40)
}

// sendRequest carries req from a to bookie b; the bookie handles it on
// arrival (or holds it while paused).
func (nw *network) sendRequest(a *actor, b *bookieNode, p *pendingReq, req *wire.Request) {
	w := nw.w
	c := nw.conn(a.name, b.id)
	p.epoch = c.epoch
	if c.loseNext {
		c.loseNext = false
		w.logf("%s -> %s %s: lost", a.name, b.id, p.desc)
		return
	}
	if p.op == wire.OpAddEntry && c.dropAdds != 0 {
		if c.dropAdds > 0 {
			c.dropAdds--
		}
		w.logf("%s -> %s %s: lost", a.name, b.id, p.desc)
		return
	}
	if nw.partitioned(a.name, b.id) || nw.lose(c) {
		w.logf("%s -> %s %s: lost", a.name, b.id, p.desc)
		return
	}
	if p.op == wire.OpAddEntry && c.failAdds {
		w.logf("%s -> %s %s: connection refused", a.name, b.id, p.desc)
		w.after(0, func() { a.refused(p) })
		return
	}
	at := max(w.now+nw.delay(c), c.lastOut)
	c.lastOut = at
	epoch := c.epoch
	w.after(at-w.now, func() {
		if c.epoch != epoch || nw.partitioned(a.name, b.id) {
			w.logf("%s -> %s %s: dropped in flight", a.name, b.id, p.desc)
			return
		}
		b.receive(a, p, req)
	})
}

// sendReply carries a bookie's answer back to a on the connection the
// request came by (epoch), dropped if that connection was reset meanwhile.
func (nw *network) sendReply(a *actor, b metadata.BookieID, epoch int, txn uint64, resp *wire.Response, desc string) {
	w := nw.w
	c := nw.conn(a.name, b)
	if c.epoch != epoch {
		return
	}
	if nw.partitioned(a.name, b) || nw.lose(c) {
		w.logf("%s <- %s %s: reply lost", a.name, b, desc)
		return
	}
	at := max(w.now+nw.delay(c), c.lastBack)
	c.lastBack = at
	w.after(at-w.now, func() {
		if c.epoch != epoch || nw.partitioned(a.name, b) {
			w.logf("%s <- %s %s: reply dropped in flight", a.name, b, desc)
			return
		}
		a.receive(txn, resp)
	})
}

// reset breaks the connection between client and bookie: in-flight
// messages are dropped and the client's pending requests on it fail.
func (nw *network) reset(a *actor, b metadata.BookieID) {
	c := nw.conn(a.name, b)
	c.epoch++
	c.lastOut, c.lastBack = 0, 0
	a.connectionLost(b)
}

// resetBookie resets every connection to bookie b (a crash).
func (nw *network) resetBookie(b metadata.BookieID) {
	for _, a := range nw.w.actors {
		if _, ok := nw.conns[connKey{a.name, b}]; ok {
			nw.reset(a, b)
		}
	}
}

// heal removes every partition and targeted loss.
func (nw *network) heal() {
	clear(nw.cut)
	clear(nw.isolated)
	for _, c := range nw.conns {
		c.loseNext, c.dropAdds, c.failAdds = false, 0, false
	}
}
