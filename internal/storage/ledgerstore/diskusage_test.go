package ledgerstore

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// usageFS is the real file system with the disk usage of chosen
// directories replaced: a full disk is a fault a test cannot produce.
type usageFS struct {
	vfs.FS
	mu   sync.Mutex
	used map[string]uint64 // directory → used bytes out of 100
}

func (f *usageFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for dir, used := range f.used {
		if path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return vfs.DiskUsage{TotalBytes: 100, UsedBytes: used, AvailBytes: 100 - used}, nil
		}
	}
	return f.FS.GetDiskUsage(path)
}

// TestDiskUsageReportsFullestLedgerDirectory: one full ledger directory
// among several is what DiskUsage reports, so the bookie turns read-only
// when any directory is full (readOnlyModeOnAnyDiskFullEnabled's
// behaviour, which Folio's per-directory ledger placement requires).
func TestDiskUsageReportsFullestLedgerDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.JournalDirs = []string{filepath.Join(dir, "j0")}
	cfg.LedgerDirs = []string{filepath.Join(dir, "l0"), filepath.Join(dir, "l1"), filepath.Join(dir, "l2")}
	fs := &usageFS{FS: vfs.Default, used: map[string]uint64{
		cfg.JournalDirs[0]: 10, cfg.LedgerDirs[0]: 20, cfg.LedgerDirs[1]: 30, cfg.LedgerDirs[2]: 40,
	}}
	s := mustOpen(t, fs, cfg)
	defer s.Close()
	u, err := s.DiskUsage()
	if err != nil || u.Used != 40 {
		t.Fatalf("DiskUsage %+v, %v; want the fullest directory (40 of 100)", u, err)
	}
	fs.mu.Lock()
	fs.used[cfg.LedgerDirs[0]] = 97
	fs.mu.Unlock()
	if u, err = s.DiskUsage(); err != nil || u.Used != 97 {
		t.Fatalf("one full ledger directory: DiskUsage %+v, %v; want 97 of 100", u, err)
	}
}
