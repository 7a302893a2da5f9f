package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/foliodb/folio/internal/tlsconf"
	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/codec"
	v3 "github.com/foliodb/folio/internal/wire/v3"
)

// TLS and authorisation of connections, as BookKeeper's bookie does them
// (spec/security.md §1, §3):
//
//  1. A connection whose first frame is a v3 START_TLS (whatever protocol
//     the client speaks afterwards) is answered EOK in plaintext; the next
//     bytes are the TLS handshake, with the bookie as the TLS server
//     (Options.TLS). The v2/v3 detection then goes on inside TLS: the
//     START_TLS frame does not count. Without Options.TLS the bookie answers
//     EBADREQ and stays plaintext. START_TLS later in a connection is
//     answered EBADREQ (Java's client sends it first or never).
//  2. A failed handshake (no client certificate where one is required, an
//     expired or unknown one, garbage) closes the connection.
//  3. With an Authorizer (bookieAuthProviderFactoryClass) a connection is
//     unauthenticated until the Authorizer accepts its TLS session; a
//     refusal is answered with a v3 response carrying the START_TLS
//     request's header and status EIO. Until accepted, and for ever on a
//     plaintext connection, requests are refused as Java's
//     AuthHandler.ServerSideHandler refuses them: v3 requests are answered
//     EUA (header echoed), v2 ADD and READ get their v2 response with EUA,
//     and any other v2 request, or a v2 AUTH, closes the connection. The
//     connection itself is not closed for being unauthenticated, as in
//     Java: the client sees EUA (UnauthorizedAccessException) on its
//     requests, or fails the connection on the EIO.
//
// One difference from Java: a v3 AUTH naming the Authorizer's plugin is
// answered EUA here; Java passes it to BookieAuthZFactory, which never
// answers it (no client plugin carries that name, so it does not arise
// between Java processes).

// Authorizer decides whether a TLS connection may be served (BookKeeper's
// BookieAuthProvider). RoleAuthorizer is BookKeeper's BookieAuthZFactory.
type Authorizer interface {
	// PluginName is the plugin name of the provider (AUTH messages
	// carrying another are refused).
	PluginName() string
	// Authorize is called once the connection's TLS handshake is done
	// (Java's onProtocolUpgrade); nil accepts the connection, an error
	// says why not (logged). Plaintext connections are never accepted.
	Authorize(state *tls.ConnectionState) error
}

// BookieAuthZFactory is the class name of BookKeeper's certificate-role
// authorisation provider, which RoleAuthorizer implements.
const BookieAuthZFactory = "org.apache.bookkeeper.tls.BookieAuthZFactory"

// RoleAuthorizer accepts a connection whose client certificate's first
// role (tlsconf.Roles: the subject's OU, `0:<role>`) is one of Roles, as
// BookKeeper's BookieAuthZFactory does with authorizedRoles.
type RoleAuthorizer struct {
	Roles []string
}

// PluginName implements Authorizer: BookieAuthZFactory's plugin name.
func (a RoleAuthorizer) PluginName() string { return "BookieAuthZFactory" }

// Authorize implements Authorizer. The errors are BookKeeper's log
// messages.
func (a RoleAuthorizer) Authorize(state *tls.ConnectionState) error {
	if state == nil {
		return errors.New("AuthZ failed: Bookie side channel is not secured")
	}
	if len(state.PeerCertificates) == 0 {
		return errors.New("AuthZ failed: Certificate missing")
	}
	cert := state.PeerCertificates[0]
	roles := tlsconf.Roles(cert)
	if len(roles) == 0 {
		return fmt.Errorf("AuthZ failed: No cert role in OU field of certificate %q. Must have a role from allowedRoles list %v", cert.Subject.String(), a.Roles)
	}
	if !slices.Contains(a.Roles, roles[0]) {
		return fmt.Errorf("AuthZ failed: Cert role %v of certificate %q doesn't match allowedRoles list %v", roles, cert.Subject.String(), a.Roles)
	}
	return nil
}

// maxStartTLSFrame bounds the first frame the server decodes to look for
// START_TLS (a START_TLS request is about 10 bytes): a longer one is left to
// the read loop.
const maxStartTLSFrame = 64

// errTLSHandshake wraps a failed handshake: the connection is closed.
var errTLSHandshake = errors.New("TLS handshake failed")

// startTLS runs before the connection's writer starts, with Options.TLS
// set. If the connection's first frame is a START_TLS it answers EOK, runs
// the handshake, asks the Authorizer, and leaves c reading and writing
// inside TLS. Any other first frame is left unread for the read loop: the
// connection is plaintext.
func (c *conn) startTLS() error {
	prefix, err := c.br.Peek(wire.FramePrefixSize)
	if err != nil {
		return err
	}
	n, err := wire.PayloadLen(prefix, c.s.opts.MaxFrameSize)
	if err != nil || n > maxStartTLSFrame {
		return nil // the read loop reads (and refuses) it
	}
	frame, err := c.br.Peek(wire.FramePrefixSize + n)
	if err != nil {
		return err
	}
	var req wire.Request
	if v3.DecodeRequest(frame[wire.FramePrefixSize:], &req) != nil || req.Header.Op != wire.OpStartTLS {
		return nil
	}
	if c.s.opts.Authorizer != nil && req.Has&wire.BodyStartTLS == 0 {
		// Java's AuthHandler lets only a START_TLS with its (empty)
		// request body through; the read loop refuses this one (EUA).
		return nil
	}
	if _, err := c.br.Discard(wire.FramePrefixSize + n); err != nil {
		return err
	}
	hdr := req.Header

	ok := wire.Response{Protocol: wire.ProtocolV3, Status: wire.StatusOK, Has: wire.BodyStartTLS,
		Header: wire.Header{Version: wire.VersionThree, Op: wire.OpStartTLS, TxnID: hdr.TxnID}}
	if err := c.writeDirect(&ok); err != nil {
		return err
	}

	// The handshake. Bytes a client sent right after its START_TLS
	// (without waiting for the answer) are in c.br: the TLS server reads
	// those first.
	tc := tls.Server(&bufferedConn{Conn: c.nc, r: c.br}, c.s.opts.TLS)
	c.nc.SetDeadline(time.Now().Add(c.s.opts.TLSHandshakeTimeout))
	err = tc.Handshake()
	c.nc.SetDeadline(time.Time{})
	if err != nil {
		c.s.opts.Metrics.ConnectionSecurity(SecurityHandshakeFailed)
		return fmt.Errorf("%w: %w", errTLSHandshake, err)
	}
	if c.stopping() {
		return errStopped // a shutdown's read deadline may have been cleared above
	}
	c.stream, c.br = tc, bufio.NewReaderSize(tc, c.s.opts.ReadBufferSize)
	state := tc.ConnectionState()
	c.log = c.log.With("tls", tls.VersionName(state.Version))
	c.s.opts.Metrics.ConnectionSecurity(SecurityTLS)
	auth := c.s.opts.Authorizer
	if auth == nil {
		c.log.Debug("TLS session established", "cipher", tls.CipherSuiteName(state.CipherSuite))
		return nil
	}
	if err := auth.Authorize(&state); err != nil {
		c.s.opts.Metrics.ConnectionSecurity(SecurityAuthFailed)
		c.log.Warn("TLS handshake failed: could not authenticate; requests will be refused (EUA)", "err", err)
		refused := wire.Response{Protocol: wire.ProtocolV3, Header: hdr, Status: wire.StatusIOError}
		return c.writeDirect(&refused)
	}
	c.authenticated = true
	c.log.Info("connection authenticated", "role", tlsconf.Roles(state.PeerCertificates[0])[0],
		"cipher", tls.CipherSuiteName(state.CipherSuite))
	return nil
}

// writeDirect writes one response on the connection's stream; only before
// the writer goroutine starts.
func (c *conn) writeDirect(resp *wire.Response) error {
	out, err := codec.EncodeResponseMax(nil, resp, maxResponseFrame)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	_, err = c.stream.Write(out)
	return err
}

// errRefused closes a connection that sent an unauthenticated request
// BookKeeper answers by closing.
var errRefused = errors.New("unauthenticated request that is answered by closing the connection")

// refuse answers a request of a connection that is not authenticated, as
// BookKeeper's AuthHandler.ServerSideHandler does (see the top of this
// file). It returns errRefused when the connection must be closed instead.
// START_TLS goes to the bookie (EBADREQ: not the first frame).
func (c *conn) refuse(r *request) error {
	req := &r.req
	c.s.opts.Metrics.ConnectionSecurity(SecurityUnauthenticated)
	if req.Protocol == wire.ProtocolV3 {
		if req.Header.Op == wire.OpStartTLS && req.Has&wire.BodyStartTLS != 0 {
			c.s.b.Handle(req, r)
			return nil
		}
		resp := wire.Response{Protocol: wire.ProtocolV3, Header: req.Header, Status: wire.StatusUnauthorized}
		r.Respond(&resp)
		return nil
	}
	resp := wire.Response{Protocol: wire.ProtocolV2, Status: wire.StatusUnauthorized,
		Header: wire.Header{Version: req.Header.Version, Op: req.Header.Op}}
	switch req.Header.Op {
	case wire.OpAddEntry:
		resp.Has = wire.BodyAdd
		resp.Add = wire.AddResponse{Status: wire.StatusUnauthorized, LedgerID: req.Add.LedgerID, EntryID: req.Add.EntryID}
	case wire.OpReadEntry:
		resp.Has = wire.BodyRead
		resp.Read = wire.ReadResponse{Status: wire.StatusUnauthorized, LedgerID: req.Read.LedgerID, EntryID: req.Read.EntryID}
	default:
		return fmt.Errorf("%w: v2 %v", errRefused, req.Header.Op)
	}
	r.Respond(&resp)
	return nil
}

// bufferedConn is a net.Conn whose reads come through a bufio.Reader that
// may hold bytes already read from it.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// SecurityEvent is a connection event Metrics.ConnectionSecurity counts.
type SecurityEvent uint8

const (
	// SecurityTLS: a TLS handshake succeeded.
	SecurityTLS SecurityEvent = iota
	// SecurityHandshakeFailed: a TLS handshake failed; the connection was
	// closed.
	SecurityHandshakeFailed
	// SecurityAuthFailed: the Authorizer refused a TLS connection.
	SecurityAuthFailed
	// SecurityUnauthenticated: a request of an unauthenticated connection
	// was refused.
	SecurityUnauthenticated
	numSecurityEvents
)

func (e SecurityEvent) String() string {
	switch e {
	case SecurityTLS:
		return "tls"
	case SecurityHandshakeFailed:
		return "tls_handshake_failed"
	case SecurityAuthFailed:
		return "authz_failed"
	case SecurityUnauthenticated:
		return "unauthenticated_request"
	}
	return "unknown"
}
