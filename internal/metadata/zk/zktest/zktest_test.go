package zktest

import (
	"context"
	"testing"
	"time"
)

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestStandaloneKillRestart: a server serves, stops serving when killed,
// and serves again after a restart on the same port.
func TestStandaloneKillRestart(t *testing.T) {
	s := Start(t)
	ctx := ctxOf(t)
	if err := Ping(ctx, s.Addr()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := Ping(pctx, s.Addr()); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := Ping(ctx, s.Addr()); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
}

// TestEnsembleSurvivesOneLoss: a 3-server ensemble serves with one server
// down, and the server rejoins.
func TestEnsembleSurvivesOneLoss(t *testing.T) {
	e := StartEnsemble(t, 3)
	ctx := ctxOf(t)
	e.Servers[0].Kill()
	for _, s := range e.Servers[1:] {
		if err := Ping(ctx, s.Addr()); err != nil {
			t.Fatalf("ping %s with one server down: %v", s.Addr(), err)
		}
	}
	if err := e.Servers[0].Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// TestExpireSession: a session attached from a second connection and
// closed is gone: attaching again finds it expired.
func TestExpireSession(t *testing.T) {
	s := Start(t)
	ctx := ctxOf(t)
	c, r, err := session(ctx, s.Addr(), 0, nil)
	if err != nil || r.sessionID == 0 {
		t.Fatalf("session: %v %+v", err, r)
	}
	defer c.Close()
	if err := ExpireSession(ctx, s.Addr(), r.sessionID, r.passwd); err != nil {
		t.Fatal(err)
	}
	c2, r2, err := session(ctx, s.Addr(), r.sessionID, r.passwd)
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if r2.sessionID != 0 {
		t.Fatalf("session %#x still valid after ExpireSession", r.sessionID)
	}
}
