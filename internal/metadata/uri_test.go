package metadata

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	for _, c := range []struct {
		in     string
		scheme string
		typ    string
		hosts  []string
		scope  string
	}{
		{"etcd://127.0.0.1:2379/ledgers", "etcd", "", []string{"127.0.0.1:2379"}, "/ledgers"},
		{"etcd://h1:2379;h2:2379,h3:2379/clusters/c1", "etcd", "", []string{"h1:2379", "h2:2379", "h3:2379"}, "/clusters/c1"},
		{"ETCD://user:pw@h1:2379/a%20b", "etcd", "", []string{"h1:2379"}, "/a b"},
		{"zk+hierarchical://zk1:2181;zk2:2181/ledgers", "zk", "hierarchical", []string{"zk1:2181", "zk2:2181"}, "/ledgers"},
		{"memory://test/ledgers", "memory", "", []string{"test"}, "/ledgers"},
	} {
		u, err := ParseURI(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if u.Scheme != c.scheme || u.SchemeType != c.typ || !slices.Equal(u.Hosts, c.hosts) || u.Scope != c.scope {
			t.Errorf("%s: got %+v", c.in, u)
		}
	}
	if got := (&URI{Scheme: "etcd", Hosts: []string{"a:1", "b:2"}, Scope: "/ledgers"}).String(); got != "etcd://a:1;b:2/ledgers" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"", "etcd", "127.0.0.1:2379/ledgers", "etcd://h:2379", "etcd://h:2379/", "etcd://h:2379/ledgers/", "etcd://h/ledgers?x=1"} {
		if _, err := ParseURI(bad); !errors.Is(err, ErrBadURI) {
			t.Errorf("%q: got %v, want ErrBadURI", bad, err)
		}
	}
}

func TestOpenDispatch(t *testing.T) {
	ctx := context.Background()
	for _, zk := range []string{"zk://127.0.0.1:2181/ledgers", "zk+hierarchical://a:2181;b:2181/ledgers"} {
		_, err := Open(ctx, zk, Options{})
		if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "ZooKeeper metadata driver not linked") {
			t.Errorf("%s: %v", zk, err)
		}
	}
	if _, err := Open(ctx, "nope://h/ledgers", Options{}); !errors.Is(err, ErrBadURI) {
		t.Errorf("unknown scheme: %v", err)
	}
	for _, pulsar := range []string{"metadata-store:zk:127.0.0.1:2181/ledgers", "metadata-store:etcd:http://h:2379"} {
		if _, err := Open(ctx, pulsar, Options{}); !errors.Is(err, ErrBadURI) || !strings.Contains(err.Error(), `"metadata-store"`) {
			t.Errorf("%s: %v, want ErrBadURI naming the scheme", pulsar, err)
		}
	}
	if u, err := ParseURI("zk://user:pw@h:2181/ledgers"); err != nil || u.UserInfo != "user:pw" || len(u.Hosts) != 1 || u.Hosts[0] != "h:2181" {
		t.Errorf("user info: %+v %v", u, err)
	}
	var gotURI *URI
	RegisterDriver("test-dispatch", func(_ context.Context, u *URI, _ Options) (Driver, error) {
		gotURI = u
		return nil, errors.New("test driver")
	})
	if _, err := Open(ctx, "test-dispatch://h1:1;h2:2/s", Options{}); err == nil || gotURI == nil || gotURI.Scope != "/s" {
		t.Errorf("dispatch: %v %+v", err, gotURI)
	}
}
