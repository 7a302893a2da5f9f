// Package v2 is the codec of BookKeeper's binary "pre-v3" bookie protocol
// (BookieProtocol in the Java sources), as Java clients and bookies of 4.17
// speak it when useV2WireProtocol is set. It translates between frame payloads
// and the protocol-neutral wire.Request and wire.Response; framing is
// wire.AppendFrame / BeginFrame / EndFrame and wire.FrameReader.
//
// Every fixed-width integer is big-endian and signed, as Java's ByteBuf writes
// it.
//
// # Packet header
//
// Every payload starts with one int32:
//
//	 31      24 23      16 15                0
//	+----------+----------+-------------------+
//	| version  |  opcode  |       flags       |
//	+----------+----------+-------------------+
//
// Version 0 is the legacy layout: the int is just the opcode, with no flags.
// As in Java (BookieProtocol.PacketHeader), a version-0 header's opcode is its
// low byte and the bits in between are ignored. Clients send version 2.
//
// Opcodes: ADD=1, READ=2, AUTH=3, BATCH_READ=7 (4.17). READ_LAC=4, WRITE_LAC=5
// and GET_BOOKIE_INFO=6 are declared by BookKeeper but never implemented: like
// every other value they fail with wire.ErrUnknownOp, and the Java bookie
// closes the connection on them.
//
// Flags: DO_FENCING=0x1, RECOVERY_ADD=0x2, HIGH_PRIORITY=0x4. Other bits are
// ignored on decode, as in Java. The Java client sends 0x0000 (add, read),
// 0x0006 (recovery add), 0x0001 (fencing LAC read) and 0x0005 (recovery read).
//
// # Versions the bookie refuses
//
// The Java bookie serves versions 0 to 2 and answers any other version with
// EBADVERSION, echoing the version and the request's ledger and entry ids.
// Its decoder does not look at the version, so neither does this one: a
// request of version 3 to 255 decodes by the same layout as version 2, and
// Header.Version carries the version byte (0..255, unsigned). The bookie
// checks SupportedVersion and answers wire.StatusBadVersion; the response
// encoder echoes whatever Header.Version holds.
//
// The one place the version changes the layout is the master key of a fencing
// READ or BATCH_READ: it is present only when the version, read as Java's
// signed byte, is at least 2 (2..127). A version-1 fencing read therefore
// decodes with HasMasterKey false, which the bookie answers with EUA.
//
// # Requests
//
//	ADD         header | masterKey [20] | body [16 or more]
//	READ        header | ledgerId [8] | entryId [8] | masterKey [20] if fencing
//	BATCH_READ  header | ledgerId [8] | startEntryId [8] | requestId [8]
//	            | maxCount int32 [4] | maxSize [8] | masterKey [20] if fencing
//	AUTH        header | AuthMessage protobuf (the rest of the payload)
//
// The AuthMessage bytes are package wire/v3's (v3.AppendAuthMessage,
// v3.DecodeAuthMessage): the same proto2 message v3 carries.
//
// ADD carries no separate ids: the bookie reads ledgerId and entryId from the
// first 16 bytes of the body (the entry header the digest package writes),
// and so does DecodeRequest. A payload too short for those 16 bytes is
// refused, as Java's decoder throws on it. Bytes after a READ or BATCH_READ
// are ignored, as in Java. The BATCH_READ requestId travels in Header.TxnID.
//
// # Responses
//
// Response headers carry the request's version and opcode and flags 0.
//
//	ADD         header | rc [4] | ledgerId [8] | entryId [8]
//	READ        header | rc [4] | ledgerId [8] | entryId [8] | body if rc = EOK
//	BATCH_READ  header | rc [4] | ledgerId [8] | startEntryId [8] | requestId [8]
//	            | { length int32 [4] | entry [length] } ...
//	AUTH        header | AuthMessage protobuf   (no rc: Status is EOK)
//
// rc is a v2 return code (wire.Status.V2Code, wire.StatusFromV2). A Java v2
// client does not know EUNKNOWNLEDGERSTATE (107): it is sent as EIO (101).
//
// # Aliasing and allocation
//
// Decoded []byte fields (keys, bodies, entries, the auth payload) alias the
// payload; keep it unmodified while the message is in use. Decoding ADD,
// READ and BATCH_READ requests and ADD and READ responses allocates nothing.
// AUTH allocates its plugin name string; a BATCH_READ response allocates its
// Entries slice, at most one element per 4 payload bytes.
package v2
