// Package wire holds the bookie protocol's messages, independent of encoding,
// the frame format both protocol versions share, and the one table that maps
// BookKeeper status codes to Go errors.
//
// Folio speaks BookKeeper 4.17's two encodings on one port: v3 (protobuf,
// package wire/v3) and v2 (a fixed binary layout, package wire/v2). Both decode
// into and encode from the types here, so the bookie and the client handle one
// Request and one Response type whatever the connection speaks.
//
// # Frames
//
//	+----------------+---------------------------------------+
//	| N: uint32 (BE) | N bytes: one v3 message or v2 packet  |
//	+----------------+---------------------------------------+
//
// N + 4 must not exceed MaxFrameSize (5 MiB), the limit of Java's Netty frame
// decoder on both ends. N = 0 is refused: the Java bookie closes such a
// connection.
//
// # Aliasing
//
// Decoders never copy entry bodies, keys or other bytes fields: the []byte
// fields of a decoded message alias the frame buffer, so the buffer must stay
// unmodified while the message is in use. Encoders append to a caller's
// buffer.
package wire
