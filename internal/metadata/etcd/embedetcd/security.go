package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/embed"
)

// TLS is the client listener's TLS: PEM files, as etcd's --cert-file,
// --key-file, --trusted-ca-file and --client-cert-auth.
type TLS struct {
	// CertFile and KeyFile are the server certificate and its key. When
	// ClientCertAuth is set, the certificate also needs the TLS client
	// usage: etcd's own gateway connects to the listener with it.
	CertFile, KeyFile string
	// TrustedCAFile signs the client certificates etcd accepts; required
	// with ClientCertAuth.
	TrustedCAFile string
	// ClientCertAuth requires every client to present a certificate signed
	// by TrustedCAFile. With Auth as well, a client that gives no password
	// is the etcd user named by its certificate's common name.
	ClientCertAuth bool
}

// Auth turns on etcd's authentication (etcdctl auth enable) with a root
// user and the users Folio's processes connect as. It is applied at the
// member's first start only: the users, roles and the switch live in the
// data directory, and a restart with auth already on leaves them as they
// are (change them with etcdctl as root).
type Auth struct {
	// RootPassword is the password of etcd's root user. Required.
	RootPassword string
	// BcryptCost is the cost of the password hashes etcd stores and checks
	// at every login (etcd's --bcrypt-cost); 0 means etcd's default (10).
	// Tests lower it to 4: a login then costs microseconds, not tens of
	// milliseconds of CPU.
	BcryptCost int
	// Users are created with a role of the same name that may read and
	// write their Prefix.
	Users []User
}

// User is an etcd user with read-write permission on every key that
// starts with Prefix (a Folio cluster's scope, e.g. "/ledgers", covers
// the scope key and every key under it).
type User struct {
	Name string
	// Password may be empty: the user then authenticates only by a client
	// certificate whose common name is Name (with TLS.ClientCertAuth).
	Password string
	Prefix   string
}

func (c Config) checkSecurity() error {
	if t := c.ClientTLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" {
			return errors.New("embedetcd: ClientTLS needs CertFile and KeyFile")
		}
		if t.ClientCertAuth && t.TrustedCAFile == "" {
			return errors.New("embedetcd: ClientTLS.ClientCertAuth needs TrustedCAFile")
		}
		for _, f := range []string{t.CertFile, t.KeyFile, t.TrustedCAFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("embedetcd: ClientTLS: %w", err)
			}
		}
	}
	if a := c.Auth; a != nil {
		if a.RootPassword == "" {
			return errors.New("embedetcd: Auth needs a RootPassword")
		}
		for _, u := range a.Users {
			if u.Name == "" || u.Name == "root" || u.Prefix == "" {
				return fmt.Errorf("embedetcd: Auth user %q: want a name other than root and a prefix", u.Name)
			}
			if u.Password == "" && (c.ClientTLS == nil || !c.ClientTLS.ClientCertAuth) {
				return fmt.Errorf("embedetcd: Auth user %q has no password and could only log in by client certificate, which needs ClientTLS.ClientCertAuth", u.Name)
			}
		}
	}
	return nil
}

func (c Config) clientScheme() string {
	if c.ClientTLS != nil {
		return "https"
	}
	return "http"
}

func (c Config) applySecurity(ec *embed.Config) {
	if c.Auth != nil && c.Auth.BcryptCost > 0 {
		ec.BcryptCost = uint(c.Auth.BcryptCost)
	}
	if t := c.ClientTLS; t != nil {
		ec.ClientTLSInfo.CertFile = t.CertFile
		ec.ClientTLSInfo.KeyFile = t.KeyFile
		ec.ClientTLSInfo.TrustedCAFile = t.TrustedCAFile
		ec.ClientTLSInfo.ClientCertAuth = t.ClientCertAuth
	}
}

// enableAuth creates the root user, the users and their roles, and turns
// authentication on, through the member itself (raft proposals, no client
// connection and so no credentials needed), unless auth is on already.
// Steps a crash interrupted are redone: "already exists" is success.
func (c Config) enableAuth(ctx context.Context, e *embed.Etcd) error {
	a := c.Auth
	if a == nil || e.Server.AuthStore().IsAuthEnabled() {
		return nil
	}
	s := e.Server
	type step struct {
		what string
		do   func() error
	}
	steps := []step{
		{"add user root", func() error {
			return errOf(s.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: a.RootPassword}))
		}},
		{"grant root the root role", func() error {
			return errOf(s.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}))
		}},
	}
	for _, u := range a.Users {
		req := &pb.AuthUserAddRequest{Name: u.Name, Password: u.Password}
		if u.Password == "" {
			req.Options = &authpb.UserAddOptions{NoPassword: true}
		}
		perm := &authpb.Permission{PermType: authpb.READWRITE, Key: []byte(u.Prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(u.Prefix))}
		steps = append(steps,
			step{"add user " + u.Name, func() error { return errOf(s.UserAdd(ctx, req)) }},
			step{"add role " + u.Name, func() error { return errOf(s.RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: u.Name})) }},
			step{"grant role " + u.Name + " read-write on " + u.Prefix, func() error {
				return errOf(s.RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: u.Name, Perm: perm}))
			}},
			step{"grant user " + u.Name + " its role", func() error {
				return errOf(s.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: u.Name, Role: u.Name}))
			}},
		)
	}
	steps = append(steps, step{"enable", func() error { return errOf(s.AuthEnable(ctx, &pb.AuthEnableRequest{})) }})
	for _, st := range steps {
		if err := st.do(); err != nil && !errors.Is(err, auth.ErrUserAlreadyExist) && !errors.Is(err, auth.ErrRoleAlreadyExist) {
			return fmt.Errorf("embedetcd: enable authentication: %s: %w", st.what, err)
		}
	}
	return nil
}

// errOf drops a response, keeping the error.
func errOf[T any](_ T, err error) error { return err }

// TLS reports whether clients connect over TLS.
func (s *Server) TLS() bool { return s.cfg.ClientTLS != nil }

// MetadataURI is the metadata service URI of scope on this member:
// etcd://host:port<scope>, or etcd+https://host:port<scope> with ClientTLS.
func (s *Server) MetadataURI(scope string) string {
	if s.TLS() {
		return "etcd+https://" + s.ClientAddr() + scope
	}
	return "etcd://" + s.ClientAddr() + scope
}
