package ledgerstore

import (
	"errors"
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
// among several is what DiskUsage (storage.Store's single figure)
// reports; per-directory verdicts come from DirUsages.
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

// TestDirUsages: every ledger directory in position order, then every
// journal directory, each with its own volume's figures; an error for one
// directory fails the call naming it.
func TestDirUsages(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.JournalDirs = []string{filepath.Join(dir, "j0")}
	cfg.LedgerDirs = []string{filepath.Join(dir, "l0"), filepath.Join(dir, "l1")}
	fs := &usageFS{FS: vfs.Default, used: map[string]uint64{
		cfg.JournalDirs[0]: 10, cfg.LedgerDirs[0]: 20, cfg.LedgerDirs[1]: 96,
	}}
	s := mustOpen(t, fs, cfg)
	defer s.Close()
	got, err := s.DirUsages()
	if err != nil {
		t.Fatal(err)
	}
	want := []DirUsage{
		{Dir: cfg.LedgerDirs[0], Position: 0, Total: 100, Free: 80, Used: 20},
		{Dir: cfg.LedgerDirs[1], Position: 1, Total: 100, Free: 4, Used: 96},
		{Dir: cfg.JournalDirs[0], Journal: true, Position: 0, Total: 100, Free: 90, Used: 10},
	}
	if len(got) != len(want) {
		t.Fatalf("DirUsages %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("DirUsages[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	bad := &errUsageFS{usageFS: fs, bad: cfg.JournalDirs[0]}
	s.fs = bad
	if _, err := s.DirUsages(); err == nil || !strings.Contains(err.Error(), "journal directory "+cfg.JournalDirs[0]) {
		t.Fatalf("DirUsages with a failing directory: %v", err)
	}
	s.fs = fs
}

// errUsageFS fails GetDiskUsage for one directory.
type errUsageFS struct {
	*usageFS
	bad string
}

func (f *errUsageFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if path == f.bad {
		return vfs.DiskUsage{}, errors.New("injected statfs failure")
	}
	return f.usageFS.GetDiskUsage(path)
}
