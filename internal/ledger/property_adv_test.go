package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestWriterPropertyExplicit is TestWriterProperty with explicit entry ids
// (WriteAt): ids are submitted out of order within a small window above the
// lowest id not yet submitted, so gaps are pending while responses, bookie
// failures, ensemble changes, CAS conflicts and recoveries happen; some
// submissions repeat an id, which must be refused with ErrDuplicateEntryID
// and send nothing. The same checks as TestWriterProperty hold: every
// acknowledgement is contiguous from 0 and on Qa bookies of its write set
// in the stored metadata, and nothing acknowledged is lost at the close.
func TestWriterPropertyExplicit(t *testing.T) {
	seeds := make([]uint64, 0, *propSeeds)
	if *propSeed != 0 {
		seeds = append(seeds, *propSeed)
	} else {
		for i := range *propSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		if msg := runWriterScheduleMode(seed, true); msg != "" {
			t.Fatalf("seed %d: %s\nrerun: go test ./internal/ledger -run TestWriterPropertyExplicit -prop.seed=%d", seed, msg, seed)
		}
	}
}

// explicitIDs chooses the ids of a random explicit-id schedule.
type explicitIDs struct {
	submitted map[int64]bool
	// lo is the lowest id not submitted yet.
	lo int64
}

func newExplicitIDs() *explicitIDs { return &explicitIDs{submitted: map[int64]bool{}} }

// writeOne submits one id in [lo, lo+6) (an id submitted before, about
// one time in six) and checks the writer's answer; it returns a
// description of what went wrong, or "".
func (x *explicitIDs) writeOne(r *rand.Rand, e *env, w *Writer) string {
	id := x.lo + int64(r.IntN(6))
	// The writer may stop inside an accepted WriteAt (the ensemble change
	// it starts for an earlier failure is one too many): the entry then
	// fails through its AddComplete, as an Append's would. So whether it
	// had stopped is read before the call.
	stopped := w.Err()
	err := w.WriteAt(id, []byte(fmt.Sprintf("w:%d", id)))
	switch {
	case stopped != nil:
		if !errors.Is(err, stopped) {
			return fmt.Sprintf("WriteAt(e%d) on a stopped writer: %v, want %v", id, err, stopped)
		}
	case x.submitted[id]:
		if !errors.Is(err, ErrDuplicateEntryID) {
			return fmt.Sprintf("WriteAt(e%d) again: %v, want ErrDuplicateEntryID", id, err)
		}
	case err != nil:
		return fmt.Sprintf("WriteAt(e%d): %v", id, err)
	}
	if err != nil {
		if effs := w.Ready(); len(effs) > 0 {
			return fmt.Sprintf("refused WriteAt(e%d) queued %v", id, effs)
		}
		return ""
	}
	x.submitted[id] = true
	for x.submitted[x.lo] {
		x.lo++
	}
	e.drain("w")
	return ""
}
