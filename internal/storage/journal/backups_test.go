package journal

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestMarkDurableKeepsBackups: with MaxBackups=2 (journalMaxBackups), the
// two newest files wholly before the checkpointed one stay on a real disk,
// older ones go, and neither replay from the checkpoint nor a reopen sees
// the backups.
func TestMarkDurableKeepsBackups(t *testing.T) {
	dir := t.TempDir()
	opts := smallOpts()
	opts.MaxBackups = 2
	j, err := Open(vfs.Default, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	appendLedgers(t, j, rec, 2, 1500)
	before, err := listFiles(vfs.Default, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) < 6 {
		t.Fatalf("want at least 6 journal files to test backups, have %d", len(before))
	}
	// Checkpoint at the first record of the fifth file.
	var ckpt Position
	for _, p := range rec.order {
		if p.File == before[4] {
			ckpt = p
			break
		}
	}
	want := 0
	for _, p := range rec.acked() {
		if p.Compare(ckpt) > 0 {
			want++
		}
	}
	if err := j.MarkDurable(ckpt); err != nil {
		t.Fatal(err)
	}
	// The preallocator may create the next file at any time: compare the
	// files that existed before.
	upTo := func(ids []uint64) []uint64 {
		n := 0
		for n < len(ids) && ids[n] <= before[len(before)-1] {
			n++
		}
		return ids[:n]
	}
	after, _ := listFiles(vfs.Default, dir, false)
	after = upTo(after)
	if !slices.Equal(after[:3], []uint64{before[2], before[3], before[4]}) || after[0] == before[0] || len(after) != len(before)-2 {
		t.Fatalf("files before MarkDurable %v, after %v: want the two before %d kept", before, after, before[4])
	}
	// A second MarkDurable at the same position deletes nothing more.
	if err := j.MarkDurable(ckpt); err != nil {
		t.Fatal(err)
	}
	if again, _ := listFiles(vfs.Default, dir, false); !slices.Equal(upTo(again), after) {
		t.Fatalf("repeated MarkDurable changed the files: %v → %v", after, again)
	}
	j.Close()

	j2, err := Open(vfs.Default, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	n := 0
	if err := j2.Replay(ckpt, func(p Position, _ Record) error {
		if p.Compare(ckpt) <= 0 {
			t.Errorf("replay from %v delivered %v", ckpt, p)
		}
		n++
		return nil
	}); err != nil || n != want {
		t.Fatalf("replay from the checkpoint after reopening: %d records (want %d), %v", n, want, err)
	}
}

func TestNegativeMaxBackupsRefused(t *testing.T) {
	opts := smallOpts()
	opts.MaxBackups = -1
	if _, err := Open(vfs.Default, t.TempDir(), opts); err == nil {
		t.Fatal("Open accepted MaxBackups=-1")
	}
}
