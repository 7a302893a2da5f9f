package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/zk/zktest"
)

// TestCookieMismatchOnZooKeeper: a bookie on ZooKeeper stamps its cookie
// under cookies/<id>; started again with another journal directory it is
// refused with an error naming the cookie's znode.
func TestCookieMismatchOnZooKeeper(t *testing.T) {
	srv := zktest.Start(t)
	root := zktest.Scope(t)
	uri := zktest.URI(srv, root)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := metadata.Open(ctx, uri, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := procConfig(t, uri)
	const id = metadata.BookieID("127.0.0.1:3181")
	created, err := CheckCookies(ctx, md, &cfg, id)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	stored, _, err := md.ReadCookie(ctx, id)
	if err != nil || !strings.Contains(string(stored), "bookieHost: \"127.0.0.1:3181\"") {
		t.Fatalf("stored cookie %q, %v", stored, err)
	}
	moved := procConfig(t, uri)
	_, err = CheckCookies(ctx, md, &moved, id)
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), root+"/cookies/127.0.0.1:3181") {
		t.Fatalf("start with other directories: %v, want a cookie error naming %s/cookies/127.0.0.1:3181", err, root)
	}
}
