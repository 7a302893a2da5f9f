// Package codec chooses, per connection, between the bookie protocol's two
// encodings (package wire/v3, protobuf, and package wire/v2, binary) as the
// Java bookie and client do.
//
// A bookie serves both on one port and learns which a connection speaks from
// its frames (BookieProtoEncoding.RequestDecoder): it reads frames as v3 until
// one fails to parse as v3, decodes that frame as v2, and reads v2 for the rest
// of the connection. That single switch also serves a v2 client with TLS,
// whose first frame is a v3 START_TLS. Responses go out in the format of the
// request they answer.
//
// A client does not probe: it speaks the protocol it is configured with. A v2
// client with TLS sends START_TLS as v3 and reads v3 responses until the
// START_TLS response has arrived (BookieProtoEncoding.ResponseDecoder).
//
// Neither ServerDecoder nor ClientCodec is safe for concurrent use: each
// belongs to the one goroutine that reads (or writes) its connection.
package codec

import (
	"errors"
	"fmt"

	"github.com/foliodb/folio/internal/wire"
	"github.com/foliodb/folio/internal/wire/v2"
	"github.com/foliodb/folio/internal/wire/v3"
)

// ServerDecoder decodes the requests of one bookie connection. The zero value
// is ready and starts in v3 mode.
type ServerDecoder struct {
	// v2 is set by the first frame that does not parse as v3, and never
	// cleared: after it every frame is decoded as v2.
	v2 bool
}

// Protocol returns the mode the connection is in: wire.ProtocolV3 until a
// frame has failed to parse as v3, wire.ProtocolV2 from then on.
func (d *ServerDecoder) Protocol() wire.Protocol {
	if d.v2 {
		return wire.ProtocolV2
	}
	return wire.ProtocolV3
}

// DecodeRequest decodes one frame payload into req (req.Protocol tells which
// encoding it was). In v3 mode a payload that v3.DecodeRequest refuses, for
// any reason, is decoded again as v2 and switches the connection to v2 for
// good, even if the v2 decoding fails too. In v2 mode only v2 is tried, so a
// v3 frame on a v2 connection is an error, as in Java. Errors wrap
// wire.ErrMalformed; the caller closes the connection on them. req's bytes
// fields alias payload.
func (d *ServerDecoder) DecodeRequest(payload []byte, req *wire.Request) error {
	if !d.v2 {
		// A payload whose first byte is a protobuf tag of field number 0
		// (0x00-0x07: every v2 header of version 0 to 7) cannot parse as v3;
		// skip the attempt. The outcome is the same as trying.
		if len(payload) > 0 && payload[0] >= 8 {
			if err := v3.DecodeRequest(payload, req); err == nil {
				return nil
			}
		}
		d.v2 = true
	}
	if err := v2.DecodeRequest(payload, req); err != nil {
		return fmt.Errorf("v2 request: %w", err)
	}
	return nil
}

// ErrProtocol is returned for a message whose Protocol is neither v2 nor v3,
// and for a request the configured protocol cannot send.
var ErrProtocol = errors.New("codec: no protocol to encode the message with")

// EncodeResponse appends resp to dst as one whole frame (length prefix and
// payload), encoded by resp.Protocol: a response goes out in the format of
// the request it answers, so set it from the request's Protocol. On error dst
// is returned unchanged: ErrProtocol for an unset Protocol, the encoder's
// error (v2.ErrUnencodable, v3's) for a response its format cannot carry, or
// wire.ErrFrameTooLarge.
func EncodeResponse(dst []byte, resp *wire.Response) ([]byte, error) {
	return EncodeResponseMax(dst, resp, wire.MaxFrameSize)
}

// EncodeResponseMax is EncodeResponse with a frame limit of maxFrame bytes,
// prefix included (wire.MaxFrameSize when 0): a bookie configured with a
// larger nettyMaxFrameSizeBytes answers with frames up to its limit.
func EncodeResponseMax(dst []byte, resp *wire.Response, maxFrame int) ([]byte, error) {
	start := len(dst)
	dst, off := wire.BeginFrame(dst)
	var err error
	switch resp.Protocol {
	case wire.ProtocolV2:
		dst, err = v2.AppendResponse(dst, resp)
	case wire.ProtocolV3:
		dst, err = v3.AppendResponse(dst, resp)
	default:
		err = fmt.Errorf("%w: response protocol %v", ErrProtocol, resp.Protocol)
	}
	if err == nil {
		dst, err = wire.EndFrameMax(dst, off, maxFrame)
	}
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// ClientCodec encodes the requests and decodes the responses of one client
// connection to a bookie.
type ClientCodec struct {
	protocol wire.Protocol
	tls      bool
	// v3Responses: a v2 client with TLS reads v3 until the START_TLS response
	// (or the first frame that does not parse as v3) has arrived.
	v3Responses bool
	// maxFrame is the largest request frame, prefix included (0:
	// wire.MaxFrameSize).
	maxFrame int
}

// SetMaxFrameSize sets the largest request frame EncodeRequest produces,
// prefix included (the client's nettyMaxFrameSizeBytes; 0: the default).
func (c *ClientCodec) SetMaxFrameSize(n int) { c.maxFrame = n }

// NewClientCodec returns the codec of a connection speaking protocol
// (wire.ProtocolV2 or wire.ProtocolV3; Java's default is v3, v2 is
// useV2WireProtocol). tls says the connection starts with START_TLS, which
// only matters to v2: its START_TLS exchange is v3.
func NewClientCodec(protocol wire.Protocol, tls bool) (*ClientCodec, error) {
	if protocol != wire.ProtocolV2 && protocol != wire.ProtocolV3 {
		return nil, fmt.Errorf("%w: client protocol %v", ErrProtocol, protocol)
	}
	return &ClientCodec{protocol: protocol, tls: tls, v3Responses: protocol == wire.ProtocolV2 && tls}, nil
}

// Protocol returns the configured protocol.
func (c *ClientCodec) Protocol() wire.Protocol { return c.protocol }

// EncodeRequest appends req to dst as one whole frame. A v3 codec encodes
// every request as v3. A v2 codec encodes START_TLS as v3 (allowed only when
// configured with TLS: its answer would be unreadable otherwise) and every
// other request as v2, which refuses WRITE_LAC, READ_LAC, GET_BOOKIE_INFO,
// FORCE_LEDGER and GET_LIST_OF_ENTRIES_OF_LEDGER with v2.ErrUnencodable: send
// those on a v3 connection, as the Java client does. req.Protocol is ignored.
// On error dst is returned unchanged.
func (c *ClientCodec) EncodeRequest(dst []byte, req *wire.Request) ([]byte, error) {
	start := len(dst)
	dst, off := wire.BeginFrame(dst)
	var err error
	switch {
	case c.protocol == wire.ProtocolV3:
		dst, err = v3.AppendRequest(dst, req)
	case req.Header.Op == wire.OpStartTLS:
		if !c.tls {
			err = fmt.Errorf("%w: START_TLS on a v2 connection configured without TLS", ErrProtocol)
			break
		}
		dst, err = v3.AppendRequest(dst, req)
	default:
		dst, err = v2.AppendRequest(dst, req)
	}
	if err == nil {
		dst, err = wire.EndFrameMax(dst, off, c.maxFrame)
	}
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// DecodeResponse decodes one frame payload into resp. A v3 codec decodes v3
// only. A v2 codec decodes v2, except that with TLS it first decodes v3 until
// a START_TLS response arrives; a frame that fails as v3 before that is
// decoded as v2 and ends the v3 phase too. Errors wrap wire.ErrMalformed; the
// caller closes the connection on them. resp's bytes fields alias payload.
func (c *ClientCodec) DecodeResponse(payload []byte, resp *wire.Response) error {
	if c.protocol == wire.ProtocolV3 {
		return v3.DecodeResponse(payload, resp)
	}
	if c.v3Responses {
		if err := v3.DecodeResponse(payload, resp); err == nil {
			if resp.Header.Op == wire.OpStartTLS {
				c.v3Responses = false
			}
			return nil
		}
		c.v3Responses = false
	}
	if err := v2.DecodeResponse(payload, resp); err != nil {
		return fmt.Errorf("v2 response: %w", err)
	}
	return nil
}
