package server

import (
	"context"
	"errors"
	"path/filepath"
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

// TestCookieExpansionCAS: a storage expansion replaces the stored cookie
// by compare-and-set on its version, on ZooKeeper (the znode's version) and
// on etcd (the key's revision); a writer that changed it meanwhile makes
// the expansion fail, and the next check completes it.
func TestCookieExpansionCAS(t *testing.T) {
	t.Run("zookeeper", func(t *testing.T) {
		srv := zktest.Start(t)
		uri := zktest.URI(srv, zktest.Scope(t))
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
		testExpansionCAS(t, uri, md)
	})
	t.Run("etcd", func(t *testing.T) {
		uri, md := procEtcd(t)
		testExpansionCAS(t, uri, md)
	})
}

func testExpansionCAS(t *testing.T, uri string, md metadata.Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const id = metadata.BookieID("127.0.0.1:3181")
	cfg := procConfig(t, uri)
	cfg.LedgerDirs = cfg.LedgerDirs[:1]
	if _, err := CheckCookies(ctx, md, &cfg, id); err != nil {
		t.Fatal(err)
	}
	grown := cfg
	grown.LedgerDirs = []string{cfg.LedgerDirs[0], filepath.Join(t.TempDir(), "ledgers-new")}

	// A concurrent writer between the read and the compare-and-set.
	race := func(path string) error {
		if path != "" {
			return nil
		}
		data, v, err := md.ReadCookie(ctx, id)
		if err != nil {
			return err
		}
		_, err = md.WriteCookie(ctx, id, data, v)
		return err
	}
	_, err := ValidateCookies(ctx, md, &grown, id, CookieOptions{AllowExpansion: true, beforeWrite: race})
	var ce *CookieError
	if !errors.As(err, &ce) || !strings.Contains(ce.Why, "changed while this bookie was adding directories") {
		t.Fatalf("expansion racing a writer: %v", err)
	}
	res, err := ValidateCookies(ctx, md, &grown, id, CookieOptions{AllowExpansion: true})
	if err != nil || len(res.Added) != 1 {
		t.Fatalf("expansion: %+v %v", res, err)
	}
	wantStoredCookie(t, md, id, &grown)
}
