package zktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// This file speaks just enough of ZooKeeper's client protocol (jute
// framing: a 4-byte big-endian length, then the record) to check that a
// server serves, and to end a session from outside the way Apache Curator's
// KillSession does: attach to the session with its id and password from a
// second connection, then close it. The server then deletes the session's
// ephemeral znodes at once and tells the session's own client, when it
// reconnects, that the session has expired: exactly what happens when a
// process stops heartbeating for longer than its session timeout, without
// waiting that long.

const (
	opCloseSession = -11
	passwordLen    = 16
)

// connectRequest encodes ConnectRequest{protocolVersion 0, lastZxidSeen,
// timeOut, sessionId, passwd, readOnly false} as a frame.
func connectRequest(sessionID int64, passwd []byte, timeout time.Duration) []byte {
	if passwd == nil {
		passwd = make([]byte, passwordLen)
	}
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint32(b, 0) // protocolVersion
	b = binary.BigEndian.AppendUint64(b, 0) // lastZxidSeen
	b = binary.BigEndian.AppendUint32(b, uint32(timeout.Milliseconds()))
	b = binary.BigEndian.AppendUint64(b, uint64(sessionID))
	b = binary.BigEndian.AppendUint32(b, uint32(len(passwd)))
	b = append(b, passwd...)
	b = append(b, 0) // readOnly
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// connectResponse is the decoded ConnectResponse.
type connectResponse struct {
	timeout   time.Duration
	sessionID int64
	passwd    []byte
}

func parseConnectResponse(body []byte) (connectResponse, error) {
	if len(body) < 20 {
		return connectResponse{}, fmt.Errorf("short ConnectResponse (%d bytes)", len(body))
	}
	r := connectResponse{
		timeout:   time.Duration(int32(binary.BigEndian.Uint32(body[4:8]))) * time.Millisecond,
		sessionID: int64(binary.BigEndian.Uint64(body[8:16])),
	}
	n := int(int32(binary.BigEndian.Uint32(body[16:20])))
	if n < 0 || 20+n > len(body) {
		return connectResponse{}, fmt.Errorf("bad password length %d in ConnectResponse", n)
	}
	r.passwd = append([]byte(nil), body[20:20+n]...)
	return r, nil
}

func readFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// session connects to addr and establishes (sessionID 0) or attaches to a
// session, returning the connection and the server's answer.
func session(ctx context.Context, addr string, sessionID int64, passwd []byte) (net.Conn, connectResponse, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, connectResponse{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write(connectRequest(sessionID, passwd, 4*time.Second)); err != nil {
		c.Close()
		return nil, connectResponse{}, err
	}
	body, err := readFrame(c)
	if err != nil {
		c.Close()
		return nil, connectResponse{}, fmt.Errorf("read ConnectResponse: %w", err)
	}
	r, err := parseConnectResponse(body)
	if err != nil {
		c.Close()
		return nil, connectResponse{}, err
	}
	return c, r, nil
}

// closeSession sends closeSession on c and waits for its reply.
func closeSession(c net.Conn) error {
	b := make([]byte, 4, 12)
	b = binary.BigEndian.AppendUint32(b, 1) // xid
	op := int32(opCloseSession)
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	binary.BigEndian.PutUint32(b, 8)
	if _, err := c.Write(b); err != nil {
		return err
	}
	reply, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("read closeSession reply: %w", err)
	}
	if len(reply) < 16 {
		return fmt.Errorf("short closeSession reply")
	}
	if code := int32(binary.BigEndian.Uint32(reply[12:16])); code != 0 {
		return fmt.Errorf("closeSession: error code %d", code)
	}
	return nil
}

// Ping establishes a session on addr and closes it: nil means the server
// serves clients.
func Ping(ctx context.Context, addr string) error {
	c, r, err := session(ctx, addr, 0, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if r.sessionID == 0 {
		return errors.New("the server refused a session")
	}
	return closeSession(c)
}

// ExpireSession ends the session sessionID (whose password is passwd) on
// the server at addr, as if its client had stopped heartbeating for its
// whole timeout: the server deletes its ephemeral znodes now, and its
// client learns the session expired when it next talks to a server. A
// session that is already gone is not an error.
func ExpireSession(ctx context.Context, addr string, sessionID int64, passwd []byte) error {
	c, r, err := session(ctx, addr, sessionID, passwd)
	if err != nil {
		return fmt.Errorf("zktest: attach to session %#x: %w", sessionID, err)
	}
	defer c.Close()
	if r.sessionID == 0 {
		return nil // expired already
	}
	if r.sessionID != sessionID {
		return fmt.Errorf("zktest: attached to session %#x, asked for %#x", r.sessionID, sessionID)
	}
	if err := closeSession(c); err != nil {
		return fmt.Errorf("zktest: close session %#x: %w", sessionID, err)
	}
	return nil
}

// Sessions records the id and password of every session its Dial's
// connections establish, so that a test can later ExpireSession one of
// them (the ZooKeeper client library keeps the password to itself). Give
// Dial to the driver as its dialer.
type Sessions struct {
	mu        sync.Mutex
	passwords map[int64][]byte
}

// NewSessions returns an empty recorder.
func NewSessions() *Sessions { return &Sessions{passwords: map[int64][]byte{}} }

// Dial dials like net.DialTimeout and watches the connection's first
// frame from the server (the ConnectResponse).
func (s *Sessions) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, s: s}, nil
}

// Expire expires session sessionID, established through Dial, on the
// server at addr.
func (s *Sessions) Expire(ctx context.Context, addr string, sessionID int64) error {
	s.mu.Lock()
	passwd, ok := s.passwords[sessionID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("zktest: session %#x was not established through this recorder's Dial", sessionID)
	}
	return ExpireSession(ctx, addr, sessionID, passwd)
}

// recordingConn parses the first frame read from the server.
type recordingConn struct {
	net.Conn
	s    *Sessions
	done bool
	buf  []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		if len(c.buf) >= 4 {
			size := int(binary.BigEndian.Uint32(c.buf))
			if len(c.buf) >= 4+size {
				c.done = true
				if r, perr := parseConnectResponse(c.buf[4 : 4+size]); perr == nil && r.sessionID != 0 {
					c.s.mu.Lock()
					c.s.passwords[r.sessionID] = r.passwd
					c.s.mu.Unlock()
				}
				c.buf = nil
			}
		}
	}
	return n, err
}
