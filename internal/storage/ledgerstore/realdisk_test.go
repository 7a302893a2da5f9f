package ledgerstore

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/foliodb/folio/internal/clock"
	"github.com/foliodb/folio/internal/storage"
)

const childEnv = "FOLIO_LEDGERSTORE_CHILD_DIR"

func realDiskConfig(dir string) Config {
	return Config{
		JournalDirs:        []string{filepath.Join(dir, "journal0"), filepath.Join(dir, "journal1")},
		LedgerDirs:         []string{filepath.Join(dir, "ledgers0"), filepath.Join(dir, "ledgers1")},
		Clock:              clock.Real{},
		WriteCacheBytes:    4 << 20,
		MaxEntryLogBytes:   1 << 20,
		CheckpointInterval: 30 * time.Millisecond,
		GCInterval:         100 * time.Millisecond,
		GCThreshold:        0.5,
	}
}

// TestRealDiskSIGKILL runs a child process (this test binary, re-executed)
// that appends on a real file system and prints every acknowledgement; the
// parent SIGKILLs it at a random moment, reopens the directory, and checks
// that every reported ack reads back byte-exact and every reported fence
// holds.
func TestRealDiskSIGKILL(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FOLIO_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (rerun with FOLIO_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	dir := t.TempDir()
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRealDiskSIGKILL$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, fmt.Sprintf("FOLIO_CHILD_SALT=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		type ack struct {
			fence    bool
			l, e     int64
			salt, sz int
		}
		var mu sync.Mutex
		var acks []ack
		ready := make(chan struct{})
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 1 && f[0] == "ready":
					close(ready)
				case len(f) == 5 && f[0] == "ack":
					l, _ := strconv.ParseInt(f[1], 10, 64)
					e, _ := strconv.ParseInt(f[2], 10, 64)
					salt, _ := strconv.Atoi(f[3])
					sz, _ := strconv.Atoi(f[4])
					mu.Lock()
					acks = append(acks, ack{l: l, e: e, salt: salt, sz: sz})
					mu.Unlock()
				case len(f) == 2 && f[0] == "fenced":
					l, _ := strconv.ParseInt(f[1], 10, 64)
					mu.Lock()
					acks = append(acks, ack{fence: true, l: l})
					mu.Unlock()
				}
			}
		}()
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatal("child did not get ready")
		}
		time.Sleep(time.Duration(100+rng.IntN(600)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone
		_ = cmd.Wait()
		mu.Lock()
		got := append([]ack(nil), acks...)
		mu.Unlock()
		s, err := Open(vfs.Default, realDiskConfig(dir))
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		nEntries, nFences := 0, 0
		for _, a := range got {
			if a.fence {
				nFences++
				err := addSync(t, s, a.l, 1<<40, entryBody(a.l, 1<<40, 0, 0, 8), storage.AddOptions{})
				if err == nil || !strings.Contains(err.Error(), storage.ErrFenced.Error()) {
					t.Fatalf("round %d: reported fence of ledger %d lost: %v", round, a.l, err)
				}
				continue
			}
			nEntries++
			mustRead(t, s, a.l, a.e, entryBody(a.l, a.e, a.e-1, a.salt, a.sz))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acked entries and %d fences survived SIGKILL", round, nEntries, nFences)
		if nEntries == 0 {
			t.Fatalf("round %d: child acknowledged nothing", round)
		}
	}
}

// runChild is the child process: 8 writers append to their own ledgers
// (new ledger ids per round) and print "ack l e salt size" after each
// acknowledgement; a fencer fences some ledgers and prints "fenced l".
func runChild(dir string) {
	round, _ := strconv.Atoi(os.Getenv("FOLIO_CHILD_SALT"))
	s, err := Open(vfs.Default, realDiskConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	emit := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(w, format, args...)
		w.Flush()
		outMu.Unlock()
	}
	emit("ready\n")
	var wg sync.WaitGroup
	for wr := 0; wr < 8; wr++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				l := int64(round*100000 + wr*1000 + k + 1)
				for e := int64(0); e < 200; e++ {
					sz := int(e%7)*150 + 10
					body := entryBody(l, e, e-1, round, sz)
					r := newResult()
					s.AddEntry(l, e, masterKey(l), body, storage.AddOptions{}, r)
					if err := <-r.ch; err != nil {
						break // fenced, or failing: next ledger
					}
					emit("ack %d %d %d %d\n", l, e, round, sz)
				}
			}
		}()
	}
	go func() {
		for k := 0; ; k++ {
			time.Sleep(20 * time.Millisecond)
			l := int64(round*100000 + (k%8)*1000 + 1 + k/8)
			if err := s.Fence(contextBackground(), l, masterKey(l)); err == nil {
				emit("fenced %d\n", l)
			}
		}
	}()
	wg.Wait()
}
