package bookie

import (
	"encoding/binary"
	"math"

	"github.com/foliodb/folio/internal/wire"
)

// getBookieInfo serves GET_BOOKIE_INFO (spec §2.5.7): the disk figures
// asked for, in bytes.
func (b *Bookie) getBookieInfo(req *wire.Request, resp *wire.Response) {
	usage, err := b.store.DiskUsage()
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "disk usage", -1, -1))
		return
	}
	b.fillStatus(req, resp, wire.StatusOK)
	g := &resp.GetBookieInfo
	asked := req.GetBookieInfo.Requested
	if asked&wire.BookieInfoTotalDiskCapacity != 0 {
		g.TotalDiskCapacity, g.HasTotalDiskCapacity = clampInt64(usage.Total), true
	}
	if asked&wire.BookieInfoFreeDiskSpace != 0 {
		g.FreeDiskSpace, g.HasFreeDiskSpace = clampInt64(usage.Free), true
	}
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// listEntries serves GET_LIST_OF_ENTRIES_OF_LEDGER (spec §2.5.8).
func (b *Bookie) listEntries(req *wire.Request, resp *wire.Response) {
	ledgerID := req.ListEntriesLedgerID
	var enc availabilityEncoder
	err := b.store.Entries(ledgerID, func(entryID int64) bool {
		enc.add(entryID)
		return true
	})
	if err != nil {
		b.fillStatus(req, resp, b.statusLogged(err, "list entries", ledgerID, -1))
		return
	}
	avail := enc.encode()
	if len(avail) > wire.MaxPayloadSize-64 {
		// Cannot be sent in one frame. Only a pathological ledger gets here
		// (over 200,000 irregular runs).
		b.log.Warn("list of entries too large for a frame", "ledger", ledgerID, "bytes", len(avail))
		b.fillStatus(req, resp, wire.StatusIOError)
		return
	}
	b.fillStatus(req, resp, wire.StatusOK)
	resp.ListEntries.Availability, resp.ListEntries.HasAvail = avail, true
}

// AvailabilityOfEntriesOfLedger encoding (Java's
// org.apache.bookkeeper.util.AvailabilityOfEntriesOfLedger; spec §2.5.8):
//
//	header (64 bytes): int32 version (0) | int32 groups G | 56 zero bytes
//	group  (24 bytes): int64 firstSequenceStart | int64 lastSequenceStart
//	                   | int32 sequenceSize | int32 sequencePeriod
//
// A group is a run of sequences of sequenceSize consecutive entries, the
// i-th starting at firstSequenceStart + i*sequencePeriod, up to
// lastSequenceStart. Groups are sorted and disjoint. A group of one
// sequence has period 0.
//
// The encoder groups maximal runs of consecutive ids that have the same
// size and lie at the same distance: the entries a bookie holds of a
// round-robin striped ledger (every E-th run of Qw entries) make one group.
const (
	availabilityHeaderSize = 64
	availabilityGroupSize  = 24
)

type availabilityGroup struct {
	first, last  int64
	size, period int64
}

type availabilityEncoder struct {
	groups []availabilityGroup
	// the run being built: [runStart, runStart+runLen)
	runStart, runLen int64
}

// add takes entry ids in ascending order.
func (e *availabilityEncoder) add(id int64) {
	if e.runLen > 0 && id == e.runStart+e.runLen && e.runLen < math.MaxInt32 {
		e.runLen++
		return
	}
	e.flushRun()
	e.runStart, e.runLen = id, 1
}

func (e *availabilityEncoder) flushRun() {
	if e.runLen == 0 {
		return
	}
	start, size := e.runStart, e.runLen
	e.runLen = 0
	if n := len(e.groups); n > 0 {
		g := &e.groups[n-1]
		if g.size == size {
			gap := start - g.last
			if g.period == 0 && gap <= math.MaxInt32 {
				g.period, g.last = gap, start
				return
			}
			if g.period == gap {
				g.last = start
				return
			}
		}
	}
	e.groups = append(e.groups, availabilityGroup{first: start, last: start, size: size})
}

func (e *availabilityEncoder) encode() []byte {
	e.flushRun()
	out := make([]byte, availabilityHeaderSize, availabilityHeaderSize+availabilityGroupSize*len(e.groups))
	binary.BigEndian.PutUint32(out[4:], uint32(len(e.groups)))
	for _, g := range e.groups {
		out = binary.BigEndian.AppendUint64(out, uint64(g.first))
		out = binary.BigEndian.AppendUint64(out, uint64(g.last))
		out = binary.BigEndian.AppendUint32(out, uint32(g.size))
		out = binary.BigEndian.AppendUint32(out, uint32(g.period))
	}
	return out
}
