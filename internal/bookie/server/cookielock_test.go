package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCookieLock: a bookie holds its cookie lock for its life, so neither
// a second start over the same directories (before registering, when the
// registration check cannot see it) nor an offline cookie operation
// rewrites the cookies under it; Shutdown releases it.
func TestCookieLock(t *testing.T) {
	uri, md := procEtcd(t)
	cfg := procConfig(t, uri)

	// A start in progress (it holds the lock before its cookie check).
	held, err := LockCookies(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = StartProcess(ctx, cfg, ProcessOptions{})
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), CookieLockFile) {
		t.Fatalf("start while the cookie lock is held: %v, want a CookieError naming %s", err, CookieLockFile)
	}
	if _, err := ExpandStorage(ctx, md, &cfg, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), CookieLockFile) {
		t.Fatalf("offline expansion while the cookie lock is held: %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	p := procStart(t, cfg, ProcessOptions{})
	if _, err := LockCookies(&cfg); err == nil {
		t.Fatal("the cookie lock was free while the bookie runs")
	}
	cfg.BookiePort = procPort(p)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := LockCookies(&cfg)
	if err != nil {
		t.Fatalf("after Shutdown: %v", err)
	}
	l.Close()
	procStart(t, cfg, ProcessOptions{}) // starts again
}
