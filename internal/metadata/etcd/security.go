package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/foliodb/folio/internal/metadata"
)

// TLS and authentication (metadata.Security) on etcd.
//
// The URI says whether the connection is TLS: etcd+https://h:2379/ledgers
// is (endpoints https://h:2379), etcd:// and etcd+http:// are not. A TLS
// configuration with a plaintext URI is refused rather than ignored or
// silently obeyed, so that what an operator reads in the URI is what runs.
// Java BookKeeper's etcd driver has neither TLS nor authentication; a Java
// process given etcd+https:// would connect in plaintext and fail.
//
// etcd authenticates a client by user and password (a token is then
// fetched at connect and refreshed by the client), or, when its client
// listener requires client certificates and no password is given, by the
// certificate's common name. Either way, a user needs read-write
// permission on the cluster's keys: the range [scope, scope+1) (etcdctl
// role grant-permission --prefix ROLE readwrite <scope>).
//
// When the connection cannot be made, New looks for the reason itself
// (diagnose): etcd's client waits for a ready connection until its
// deadline and then reports only "context deadline exceeded", which would
// leave an operator guessing between a dead store, an untrusted
// certificate and a refused client certificate.

// URI types of the etcd scheme.
const (
	uriTypePlain = "http"
	uriTypeTLS   = "https"
)

// endpointScheme maps the URI's type to the endpoints' URL scheme.
func endpointScheme(u *metadata.URI) (string, error) {
	switch u.SchemeType {
	case "", uriTypePlain:
		return "http", nil
	case uriTypeTLS:
		return "https", nil
	}
	return "", fmt.Errorf("%w %q: unknown etcd URI type %q: use etcd://host:2379/scope (plaintext) or etcd+https://host:2379/scope (TLS)", metadata.ErrBadURI, u.String(), u.SchemeType)
}

// checkSecurity refuses settings that contradict the endpoints.
func checkSecurity(endpoints []string, tlsConf *tls.Config, user, password string) error {
	if err := (metadata.Security{User: user, Password: password}).Check(); err != nil {
		return err
	}
	if tlsConf == nil {
		return nil
	}
	for _, ep := range endpoints {
		if !strings.HasPrefix(ep, "https://") {
			return fmt.Errorf("%w: a TLS configuration is given, but endpoint %s is plaintext: use an etcd+https:// URI (https:// endpoints) for TLS, or give no TLS settings", metadata.ErrBadSecurity, ep)
		}
	}
	return nil
}

// securityErr maps etcd's authentication and authorisation errors to the
// metadata sentinels, keeping etcd's message. Other errors are returned as
// they are.
func securityErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("%w: %v (check the user and the password)", metadata.ErrAuthFailed, err)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("%w: %v: etcd has authentication enabled; give a user and password, or a client certificate whose common name is an etcd user", metadata.ErrAuthFailed, err)
	case errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthOldRevision):
		return fmt.Errorf("%w: %v", metadata.ErrAuthFailed, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrUserNotFound):
		return fmt.Errorf("%w: %v (the user needs read-write permission on the cluster's keys: etcdctl role grant-permission --prefix <role> readwrite <scope>)", metadata.ErrPermissionDenied, err)
	}
	return err
}

// isSecurityErr reports whether err is one securityErr maps.
func isSecurityErr(err error) bool {
	return errors.Is(err, metadata.ErrAuthFailed) || errors.Is(err, metadata.ErrPermissionDenied)
}

// diagnose finds out why no endpoint answered: for each endpoint it
// connects over TCP and, for https:// endpoints, makes a TLS handshake
// with the driver's own TLS configuration and reads once, which reveals a
// client certificate the server refused (TLS 1.3 reports that after the
// client's side of the handshake is done). It returns the first problem
// found, wrapped in metadata.ErrTLS for a TLS one, or nil if every
// endpoint looks healthy (the cause is then elsewhere: etcd without a
// quorum, for one). It spends at most timeout per endpoint.
func diagnose(ctx context.Context, endpoints []string, tlsConf *tls.Config, timeout time.Duration) error {
	var errs []error
	for _, ep := range endpoints {
		if err := diagnoseEndpoint(ctx, ep, tlsConf, timeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func diagnoseEndpoint(ctx context.Context, ep string, tlsConf *tls.Config, timeout time.Duration) error {
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("%s: not reachable: %w", ep, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if u.Scheme != "https" {
		// Does it speak TLS? A plaintext client gets no answer from a TLS
		// listener; a TLS hello tells.
		probe := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // probes the protocol, sends nothing
		if probe.HandshakeContext(ctx) == nil {
			return fmt.Errorf("%s: %w: the server speaks TLS, but the URI is plaintext: use an etcd+https:// URI with the CA that signs its certificate", ep, metadata.ErrTLS)
		}
		return nil
	}
	conf := &tls.Config{}
	if tlsConf != nil {
		conf = tlsConf.Clone()
	}
	if conf.ServerName == "" {
		conf.ServerName = u.Hostname()
	}
	conf.NextProtos = []string{"h2"} // as gRPC does
	tc := tls.Client(conn, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%s: %w: %v%s", ep, metadata.ErrTLS, err, tlsHint(err, conf))
	}
	// The server has our certificate (or our lack of one) now; if it
	// refuses it, the refusal is the next thing to read. A healthy etcd
	// instead sends its HTTP/2 settings, or nothing until the deadline.
	_ = tc.SetReadDeadline(time.Now().Add(min(timeout, time.Second)))
	if _, err := tc.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if strings.Contains(err.Error(), "remote error") {
			return fmt.Errorf("%s: %w: the server refused the client certificate: %v%s", ep, metadata.ErrTLS, err, tlsHint(err, conf))
		}
	}
	return nil
}

// tlsHint says what to check for a TLS failure.
func tlsHint(err error, conf *tls.Config) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unknown authority"):
		if conf.RootCAs == nil {
			return " (no CA is configured, so the system's roots were used: give the CA that signs etcd's certificate)"
		}
		return " (the configured CA does not sign etcd's certificate)"
	case strings.Contains(msg, "certificate is valid for"), strings.Contains(msg, "doesn't contain any IP SANs"):
		return " (etcd's certificate is not valid for the host in the URI)"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		if len(conf.Certificates) == 0 {
			return " (etcd requires a client certificate: give one and its key)"
		}
		return " (etcd does not trust the client certificate: it must be signed by a CA in etcd's --trusted-ca-file)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return " (the server does not speak TLS: use an etcd:// URI)"
	case errors.Is(err, io.EOF), strings.Contains(msg, "connection reset"):
		return " (the server closed the connection at the TLS hello: it probably does not speak TLS; for a plaintext etcd use an etcd:// URI)"
	}
	return ""
}
