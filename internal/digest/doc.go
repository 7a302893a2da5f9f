// Package digest computes and checks BookKeeper entry digests, LAC-body
// digests and the ledger master key, byte for byte as Java BookKeeper 4.17
// does (proto/checksum/DigestManager.java and its subclasses; spec
// wire-protocol.md §5).
//
// # Entry body
//
// What a client sends with an add and gets back from a read:
//
//	 0        8        16       24       32         32+D
//	+--------+--------+--------+--------+----------+------------------+
//	|ledgerId|entryId |  LAC   | length |  digest  |     payload      |
//	+--------+--------+--------+--------+----------+------------------+
//	 int64 BE each                       D bytes     the user's bytes
//
// LAC is the writer's last add confirmed when it sent the entry (-1 if none).
// length is the cumulative ledger length in bytes including this entry's
// payload, not the entry size. The digest covers bytes 0..31 followed by the
// payload; it never covers itself.
//
// # LAC body
//
// What WRITE_LAC carries and READ_LAC returns:
//
//	 0        8        16
//	+--------+--------+----------+
//	|ledgerId|  lac   |  digest  |
//	+--------+--------+----------+
//
// The digest covers bytes 0..15 only, with the entry digest's algorithm and key.
//
// # Digest types
//
//	type    D   algorithm                                stored as
//	CRC32   8   CRC-32 IEEE                              4 zero bytes, then the CRC (BE)
//	CRC32C  4   CRC-32C Castagnoli                       uint32 BE
//	HMAC    20  HMAC-SHA1, key SHA1("mac" ‖ password)    raw bytes
//	DUMMY   0   none                                     nothing
//
// The master key SHA1("ledger" ‖ password) is an opaque access token that
// every add, fence and WRITE_LAC carries whatever the digest type; bookies
// compare it and never see the password or check a digest.
//
// SHA-1 is mandated by the formats above, so Folio cannot run with
// GODEBUG=fips140=only (crypto/sha1 panics in that mode).
//
// # Checks on read
//
// VerifyEntry and VerifyLAC apply Java's checks in Java's order: body size,
// digest, ledger id, then (entries only) entry id. Any failure means the
// replica's answer is bad and the client should try another replica; the
// error says which check failed (see MismatchError).
package digest
