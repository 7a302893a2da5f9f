package standalone

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
)

// runUntilReady starts Run and waits for its readiness line and Info.
func runUntilReady(t *testing.T, cfg Config) (line string, info Info, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	infos := make(chan Info, 1)
	done := make(chan error, 1)
	cfg.Stdout = &out
	cfg.OnReady = func(i Info) { infos <- i }
	go func() { done <- Run(ctx, cfg) }()
	select {
	case info = <-infos:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("not ready within 60 s")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(15 * time.Second):
			t.Error("not stopped within 15 s")
		}
	}
	t.Cleanup(stop)
	return out.String(), info, stop
}

// auditorOf polls the elected auditor until want (or 20 s).
func auditorOf(t *testing.T, uri string, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	ar := md.(metadata.AutoRecoveryDriver)
	var got metadata.BookieID
	for ctx.Err() == nil {
		got, err = ar.Auditor(ctx)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			t.Fatal(err)
		}
		if string(got) == want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return string(got)
}

// --bookies 0: etcd, HTTP and AutoRecovery only; the readiness line ends
// with an empty bookie list, and the embedded auditor is elected under the
// HTTP address.
func TestZeroBookiesRunsAutoRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Bookies: 0, DataDir: dir}
	line, info, stop := runUntilReady(t, cfg)
	if !strings.HasPrefix(line, ReadyPrefix+"metadata-service-uri="+info.MetadataServiceURI+" ") || !strings.HasSuffix(line, " bookies=\n") {
		t.Fatalf("readiness line %q", line)
	}
	if len(info.Bookies) != 0 || info.AutoRecoveryID != info.HTTPAddr || info.AutoRecoveryWorkers != 1 {
		t.Fatalf("info %+v", info)
	}
	if got := auditorOf(t, info.MetadataServiceURI, info.AutoRecoveryID); got != info.AutoRecoveryID {
		t.Fatalf("auditor %q, want %q", got, info.AutoRecoveryID)
	}
	p, err := loadPorts(dir)
	if err != nil || p.HTTP == 0 || len(p.Bookies) != 0 {
		t.Fatalf("ports %+v, %v", p, err)
	}
	stop()

	// Restart with AutoRecovery disabled: no auditor once the old
	// election's session is gone (it was closed on stop).
	cfg.AutoRecovery.Disabled = true
	_, info, _ = runUntilReady(t, cfg)
	if info.AutoRecoveryID != "" {
		t.Fatalf("disabled AutoRecovery: info %+v", info)
	}
	if got := auditorOf(t, info.MetadataServiceURI, ""); got != "" {
		t.Fatalf("auditor %q with AutoRecovery disabled", got)
	}
}

// Fewer bookies than recorded keep the other bookies' ports recorded.
func TestFewerBookiesKeepRecordedPorts(t *testing.T) {
	dir := t.TempDir()
	if err := savePorts(dir, ports{Bookies: []int{0, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	_, _, stop := runUntilReady(t, Config{Bookies: 1, DataDir: dir, BookieSet: []string{"zkTimeout=2000"}})
	stop()
	p, err := loadPorts(dir)
	if err != nil || len(p.Bookies) != 3 || p.Bookies[0] == 0 {
		t.Fatalf("ports %+v, %v", p, err)
	}
}
