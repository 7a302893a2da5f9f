package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/metadata"
	"github.com/foliodb/folio/internal/metadata/etcd/etcdtest"
)

// TestMetadataSecurity: the client reaches an etcd that requires client
// certificates and users with MetadataTLS, MetadataUser and
// MetadataPassword, and a wrong password, a missing client certificate or
// TLS settings with a plaintext URI fail New with an error naming the
// endpoint (or the contradiction), within the connect timeout.
func TestMetadataSecurity(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.SecureOptions{ClientCertAuth: true, Auth: true})
	uri := etcdtest.URI(srv.Server, etcdtest.Scope(t))
	sec := srv.Security(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := metadata.Open(ctx, uri, metadata.Options{Security: sec})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	if _, err := md.InitNewCluster(ctx); err != nil {
		t.Fatal(err)
	}
	good := client.Config{MetadataServiceURI: uri, MetadataTLS: sec.TLS, MetadataUser: sec.User, MetadataPassword: sec.Password}
	c, err := client.New(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLedger(ctx, client.LedgerOptions{EnsembleSize: 1}); !errors.Is(err, client.ErrNotEnoughBookies) {
		t.Errorf("CreateLedger without bookies: %v (the metadata store answered, so it needs bookies)", err)
	}
	c.Close()

	ep := "https://" + srv.ClientAddr()
	wrongPW := good
	wrongPW.MetadataPassword = "nope"
	noCert := good
	noCert.MetadataTLS = sec.TLS.Clone()
	noCert.MetadataTLS.Certificates = nil
	plain := good
	plain.MetadataServiceURI = strings.Replace(uri, "etcd+https://", "etcd://", 1)
	elsewhere := good
	elsewhere.MetadataServiceURI = etcdtest.URI(srv.Server, "/elsewhere")
	for _, tc := range []struct {
		name string
		cfg  client.Config
		is   error
		want string
	}{
		{"wrong password", wrongPW, client.ErrMetadataAuth, ep},
		{"no client certificate", noCert, client.ErrMetadataTLS, ep},
		{"scope outside the user's permission", elsewhere, client.ErrMetadataAuth, "permission"},
		{"TLS with a plaintext URI", plain, client.ErrInvalidConfig, "etcd+https://"},
	} {
		tc.cfg.ConnectTimeout = 3 * time.Second
		c, err := client.New(ctx, tc.cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s: New succeeded", tc.name)
			continue
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "client: metadata store ") {
			t.Errorf("%s: %v", tc.name, err)
		}
		wantCode := map[error]int{client.ErrMetadataAuth: -18, client.ErrMetadataTLS: -18, client.ErrInvalidConfig: -14}[tc.is]
		if got := client.Code(err); got != wantCode {
			t.Errorf("%s: Code %d, want %d", tc.name, got, wantCode)
		}
	}
}
