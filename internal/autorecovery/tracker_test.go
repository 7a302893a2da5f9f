package autorecovery

import (
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

func bk(s ...string) []metadata.BookieID {
	out := make([]metadata.BookieID, len(s))
	for i, x := range s {
		out[i] = metadata.BookieID(x)
	}
	return out
}

// The lostBookieRecoveryDelay state machine (spec/protocol.md §6.2, #21).
func TestBookieTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	all := bk("a:1", "b:1", "c:1", "d:1")

	t.Run("delay 0 audits at once", func(t *testing.T) {
		tr := newBookieTracker(0)
		tr.membership(t0, all)
		if !tr.membership(t0, bk("a:1", "b:1", "c:1")) {
			t.Fatal("no audit with delay 0")
		}
	})
	t.Run("one lost bookie waits for the delay; its return cancels", func(t *testing.T) {
		tr := newBookieTracker(60 * time.Second)
		tr.membership(t0, all)
		if tr.membership(t0, bk("a:1", "b:1", "c:1")) {
			t.Fatal("audited before the delay")
		}
		if tr.due(t0.Add(59 * time.Second)) {
			t.Fatal("due early")
		}
		if tr.membership(t0.Add(20*time.Second), all) {
			t.Fatal("audit when the bookie came back")
		}
		if tr.due(t0.Add(61 * time.Second)) {
			t.Fatal("delayed audit not cancelled by the bookie's return")
		}
	})
	t.Run("delay expires", func(t *testing.T) {
		tr := newBookieTracker(60 * time.Second)
		tr.membership(t0, all)
		tr.membership(t0, bk("a:1", "b:1", "c:1"))
		if !tr.due(t0.Add(60 * time.Second)) {
			t.Fatal("not due after the delay")
		}
		tr.audited()
		if tr.due(t0.Add(120 * time.Second)) {
			t.Fatal("still due after the audit")
		}
	})
	t.Run("two lost bookies audit at once", func(t *testing.T) {
		tr := newBookieTracker(60 * time.Second)
		tr.membership(t0, all)
		if tr.membership(t0, bk("a:1", "b:1", "c:1")) {
			t.Fatal("one lost audited at once")
		}
		if !tr.membership(t0.Add(time.Second), bk("a:1", "b:1")) {
			t.Fatal("second lost bookie did not audit at once")
		}
		tr2 := newBookieTracker(60 * time.Second)
		tr2.membership(t0, all)
		if !tr2.membership(t0, bk("a:1", "b:1")) {
			t.Fatal("two lost at once did not audit at once")
		}
	})
	t.Run("same delay again audits now; another reschedules", func(t *testing.T) {
		tr := newBookieTracker(60 * time.Second)
		tr.membership(t0, all)
		if !tr.delayChanged(t0, 60*time.Second) {
			t.Fatal("setting the same delay did not audit")
		}
		tr.membership(t0, bk("a:1", "b:1", "c:1"))
		if tr.delayChanged(t0.Add(10*time.Second), 30*time.Second) {
			t.Fatal("a new delay audited at once")
		}
		if tr.due(t0.Add(39 * time.Second)) {
			t.Fatal("due before the rescheduled deadline")
		}
		if !tr.due(t0.Add(40 * time.Second)) {
			t.Fatal("not due at the rescheduled deadline")
		}
		if !tr.delayChanged(t0, 0) {
			t.Fatal("delay 0 did not audit")
		}
	})
	t.Run("read-only is available", func(t *testing.T) {
		tr := newBookieTracker(0)
		tr.membership(t0, all)
		// The caller passes writable ∪ read-only: d moving to read-only
		// keeps the same set.
		if tr.membership(t0, union(bk("a:1", "b:1", "c:1"), bk("d:1"))) {
			t.Fatal("a read-only bookie counted as lost")
		}
	})
}
