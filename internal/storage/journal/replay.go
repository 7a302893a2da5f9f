package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ReplayFunc receives one record during replay, with the Position just
// after it (the same value its append's callback received). rec.Body is
// valid only until ReplayFunc returns. A non-nil error stops the replay and
// is returned by Replay.
type ReplayFunc func(pos Position, rec Record) error

// Replay delivers, in order, every record of the journal in dir at or after
// from (the zero Position means from the beginning), across files. It cuts
// a torn tail silently and returns a *CorruptionError (errors.Is
// ErrCorrupt) for damage anywhere else. It must not run while a Journal is
// writing to dir; use Journal.Replay then. Replay may deliver records that
// were never acknowledged, and records delivered by an earlier replay; see
// the package comment.
func Replay(fs vfs.FS, dir string, from Position, fn ReplayFunc) error {
	ids, err := listFiles(fs, dir, false)
	if err != nil {
		return err
	}
	return replayFiles(fs, dir, ids, from, nil, fn)
}

// link is what a file header says about the file before it.
type link struct {
	prevID  uint64
	prevEnd int64
}

func replayFiles(fs vfs.FS, dir string, ids []uint64, from Position, last *link, fn ReplayFunc) error {
	i, found := slices.BinarySearch(ids, from.File)
	if from.File != 0 && !found {
		return fmt.Errorf("journal: replay must start in file %s of %s, which is missing",
			fileName(from.File), dir)
	}
	var prevID uint64
	var prevEnd int64
	for ; i < len(ids); i++ {
		id := ids[i]
		start := int64(FirstGroupOffset)
		if id == from.File {
			start = max(from.Offset, FirstGroupOffset)
		}
		sc, err := scanFile(fs, fs.PathJoin(dir, fileName(id)), id, start, fn)
		if err != nil {
			return err
		}
		if prevID != 0 {
			followed := i+1 < len(ids) || last != nil
			if err := checkLink(fs, dir, prevID, prevEnd, id, sc.link(), followed); err != nil {
				return err
			}
		}
		prevID, prevEnd = id, sc.end
	}
	if last != nil && prevID != 0 && last.prevID == prevID {
		return checkLink(fs, dir, prevID, prevEnd, prevID+1, *last, true)
	}
	return nil
}

// checkLink verifies that file prevID still ends where file id (the file
// after it) recorded that it ended. A version 2 file created ahead of
// rotation records that only in its group headers; if it has none
// (l.prevEnd == 0), the end of prevID is unchecked, which is allowed only
// for the last file of the directory (followed false): Open removes such a
// file before it starts the next one.
func checkLink(fs vfs.FS, dir string, prevID uint64, prevEnd int64, id uint64, l link, followed bool) error {
	switch {
	case l.prevID == 0:
		return nil
	case l.prevID != prevID:
		return &CorruptionError{File: fs.PathJoin(dir, fileName(id)), Offset: 0,
			Reason: fmt.Sprintf("header says the previous file is %s, but it is %s (a journal file is missing?)",
				fileName(l.prevID), fileName(prevID))}
	case l.prevEnd == 0 && followed:
		return &CorruptionError{File: fs.PathJoin(dir, fileName(id)), Offset: 0,
			Reason: fmt.Sprintf("holds no group recording where %s ended, but is followed by another file",
				fileName(prevID))}
	case l.prevEnd == 0:
		return nil
	case l.prevEnd != prevEnd:
		return &CorruptionError{File: fs.PathJoin(dir, fileName(prevID)), Offset: min(prevEnd, l.prevEnd),
			Reason: fmt.Sprintf("records end at offset %d, but %s recorded that they ended at %d (synced data lost)",
				prevEnd, fileName(id), l.prevEnd)}
	}
	return nil
}

// fileScan is what scanning one file found.
type fileScan struct {
	hdr fileHeader
	end int64 // where its log ends
	// Version 2: the previous file's end as recorded by the group headers
	// (-1: no group header found), and how many valid group headers the
	// file holds (including a torn tail's).
	groupPin int64
	groups   int
}

// link is what the file says about the file before it.
func (sc fileScan) link() link {
	l := link{prevID: sc.hdr.prevID, prevEnd: sc.hdr.prevEnd}
	if l.prevEnd == 0 && sc.groupPin > 0 {
		l.prevEnd = sc.groupPin
	}
	return l
}

// unusedAhead reports whether the file was created ahead of a rotation
// and never written: version 2, a previous file whose end the header does
// not record, and no valid group header.
func (sc fileScan) unusedAhead() bool {
	return sc.hdr.version == FormatVersion && sc.hdr.prevID != 0 && sc.hdr.prevEnd == 0 && sc.groups == 0
}

// scanFile delivers the records of one file that end after offset start
// (nil fn: none) and reports where its log ends, with its header.
func scanFile(fs vfs.FS, path string, id uint64, start int64, fn ReplayFunc) (fileScan, error) {
	sc := fileScan{groupPin: -1}
	f, err := fs.Open(path)
	if err != nil {
		return sc, fmt.Errorf("journal: opening %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return sc, fmt.Errorf("journal: stat %s: %w", path, err)
	}
	r := &fileReader{f: f, path: path, id: id, size: st.Size(), window: 1 << 20}
	hb, err := r.at(0, fileHeaderUsed)
	if err != nil {
		return sc, err
	}
	if sc.hdr, err = decodeFileHeader(hb, id); err != nil {
		return sc, &CorruptionError{File: path, Offset: 0, Reason: err.Error()}
	}
	if start > r.size {
		return sc, &CorruptionError{File: path, Offset: r.size,
			Reason: fmt.Sprintf("replay starts at offset %d, beyond the end of the file", start)}
	}
	if sc.hdr.version == formatVersion1 {
		sc.end, err = r.scan(start, fn)
		return sc, err
	}
	err = r.scanV2(start, fn, &sc)
	return sc, err
}

// fileReader reads one journal file through a window buffer.
type fileReader struct {
	f      vfs.File
	path   string
	id     uint64
	size   int64
	window int
	buf    []byte
	bufOff int64
	rec    Record
}

// at returns the bytes [off, off+n) clipped to the file size. The slice is
// valid until the next call.
func (r *fileReader) at(off int64, n int) ([]byte, error) {
	if off >= r.size || n <= 0 {
		return nil, nil
	}
	n = int(min(int64(n), r.size-off))
	if off >= r.bufOff && off+int64(n) <= r.bufOff+int64(len(r.buf)) {
		return r.buf[off-r.bufOff : off-r.bufOff+int64(n)], nil
	}
	want := int(min(int64(max(n, r.window)), r.size-off))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	k, err := r.f.ReadAt(r.buf, off)
	if k < want {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.buf = r.buf[:0]
		return nil, fmt.Errorf("journal: reading %s at offset %d: %w", r.path, off, err)
	}
	r.bufOff = off
	return r.buf[:n], nil
}

// record parses the record at off. ok is false if no valid record is
// there (zeros, torn or damaged bytes); err is set only for read errors and
// for valid records this version cannot decode.
func (r *fileReader) record(off int64) (size int64, flags byte, ok bool, err error) {
	h, err := r.at(off, RecordHeaderSize)
	if err != nil || len(h) < RecordHeaderSize {
		return 0, 0, false, err
	}
	length := int64(binary.LittleEndian.Uint32(h[4:]))
	if length > MaxPayloadBytes || off+RecordHeaderSize+length > r.size {
		return 0, 0, false, nil
	}
	size = RecordHeaderSize + length
	b, err := r.at(off, int(size))
	if err != nil {
		return 0, 0, false, err
	}
	flags, ok, err = decodeRecord(r.id, off, b, &r.rec)
	if err != nil {
		return 0, 0, false, &CorruptionError{File: r.path, Offset: off, Reason: err.Error()}
	}
	return size, flags, ok, nil
}

// decodeRecord checks and decodes the whole encoded record b (header and
// the payload its length field gives) read at (fileID, off). ok is false if
// the checksum does not match (no record there); err is set only for a
// record with a valid checksum that this version cannot decode. rec.Body
// aliases b.
func decodeRecord(fileID uint64, off int64, b []byte, rec *Record) (flags byte, ok bool, err error) {
	if len(b) < RecordHeaderSize || int64(binary.LittleEndian.Uint32(b[4:])) != int64(len(b)-RecordHeaderSize) {
		return 0, false, nil
	}
	if binary.LittleEndian.Uint32(b) != recordCRC(fileID, off, b) {
		return 0, false, nil
	}
	flags = b[9]
	if err := decodePayload(RecordType(b[8]), flags, b[RecordHeaderSize:], rec); err != nil {
		return 0, false, err
	}
	return flags, true, nil
}

// scan walks the records from start and returns where the log ends.
func (r *fileReader) scan(start int64, fn ReplayFunc) (int64, error) {
	pos := start
	for {
		size, flags, ok, err := r.record(pos)
		if err != nil {
			return 0, err
		}
		if ok {
			if flags&flagGroupStart != 0 && pos%GroupAlignment != 0 {
				return 0, &CorruptionError{File: r.path, Offset: pos, Reason: "group start at an unaligned offset"}
			}
			pos += size
			if fn != nil {
				if err := fn(Position{File: r.id, Offset: pos}, r.rec); err != nil {
					return 0, err
				}
			}
			continue
		}
		// No valid record at pos: either the padding after a group, the end
		// of the log, or damage (see the package comment).
		next := alignUp(pos)
		damaged := pos
		if next > pos {
			isGap, err := r.zeros(pos, next)
			if err != nil {
				return 0, err
			}
			if isGap {
				damaged = next // padding is intact: a group start belongs at next
				if ok, err := r.groupStartAt(next); err != nil {
					return 0, err
				} else if ok {
					pos = next
					continue
				}
			}
		}
		later, err := r.findGroupStart(alignUp(pos + 1))
		if err != nil {
			return 0, err
		}
		if later >= 0 {
			return 0, &CorruptionError{File: r.path, Offset: damaged, Reason: fmt.Sprintf(
				"no valid record here, but a group written later (after this offset was synced) starts at offset %d", later)}
		}
		return pos, nil
	}
}

// zeros reports whether [from, to) holds only zero bytes (bytes past the
// end of the file count as zeros).
func (r *fileReader) zeros(from, to int64) (bool, error) {
	b, err := r.at(from, int(to-from))
	if err != nil {
		return false, err
	}
	for _, c := range b {
		if c != 0 {
			return false, nil
		}
	}
	return true, nil
}

// groupStartAt reports whether a valid group-start record is at off.
func (r *fileReader) groupStartAt(off int64) (bool, error) {
	h, err := r.at(off, RecordHeaderSize)
	if err != nil || len(h) < RecordHeaderSize || h[9]&flagGroupStart == 0 {
		return false, err
	}
	_, flags, ok, err := r.record(off)
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			// A checksummed record this version cannot decode: whatever it
			// is, it was written there on purpose.
			return true, nil
		}
		return false, err
	}
	return ok && flags&flagGroupStart != 0, nil
}

// findGroupStart returns the first aligned offset ≥ from holding a valid
// group start, or -1.
func (r *fileReader) findGroupStart(from int64) (int64, error) {
	for off := from; off+RecordHeaderSize <= r.size; off += GroupAlignment {
		ok, err := r.groupStartAt(off)
		if err != nil {
			return 0, err
		}
		if ok {
			return off, nil
		}
	}
	return -1, nil
}

// scanV2 walks the groups of a version 2 file from its first group,
// delivers the records that end after start, and fills in sc. The rule
// (package comment, "Torn tails and corruption"): groups are read in
// sequence; at the first group that is missing or damaged, the log ends
// there if no valid group header follows it except its successor's (the
// two unsynced groups a crash can leave); any other valid group header
// after it means it had been synced: corruption.
func (r *fileReader) scanV2(start int64, fn ReplayFunc, sc *fileScan) error {
	pos := int64(FirstGroupOffset)
	logEnd := pos // end of the last intact group
	seq := uint64(1)
	for {
		h, ok, err := r.groupHeader(pos)
		if err != nil {
			return err
		}
		if ok {
			if h.seq != seq {
				return &CorruptionError{File: r.path, Offset: pos, Reason: fmt.Sprintf(
					"group number %d where group %d belongs", h.seq, seq)}
			}
			if err := r.pin(pos, h, sc); err != nil {
				return err
			}
			intact, err := r.groupIntact(pos, h)
			if err != nil {
				return err
			}
			if intact {
				if err := r.deliverGroup(pos, h, start, fn); err != nil {
					return err
				}
				logEnd = pos + GroupHeaderSize + h.length
				pos = alignUp(logEnd)
				seq++
				continue
			}
		}
		// Group seq is missing or damaged at pos. Only its successor may
		// have been written without it being synced. If the group's header
		// is valid, its length says where the successor must be, and
		// nothing else was written before that; else every later boundary
		// is probed. The bytes inside a successor found where k's valid
		// header puts it are its payload (client data, which may by chance
		// or design hold a valid-looking header): they are skipped.
		probe, succAt := alignUp(pos+1), int64(-1)
		if ok {
			probe = alignUp(pos + GroupHeaderSize + h.length)
			succAt = probe
		}
		successor := false
		for off := probe; off+GroupHeaderSize <= r.size; {
			h2, ok, err := r.groupHeader(off)
			if err != nil {
				return err
			}
			if !ok {
				off += GroupAlignment
				continue
			}
			if h2.seq == seq+1 && !successor && (succAt < 0 || off == succAt) {
				successor = true
				if err := r.pin(off, h2, sc); err != nil {
					return err
				}
				if succAt >= 0 {
					// Where k's valid header puts k+1: it is k+1, and
					// its payload is client data.
					off = alignUp(off + GroupHeaderSize + h2.length)
				} else {
					// k's header is lost, so this may be a look-alike
					// inside k's payload whose length would jump over
					// the real k+1 and k+2 (the proof that k was
					// synced): keep probing every boundary.
					off += GroupAlignment
				}
				continue
			}
			return &CorruptionError{File: r.path, Offset: pos, Reason: fmt.Sprintf(
				"group %d here is missing or damaged, but group %d at offset %d was written after it had been synced",
				seq, h2.seq, off)}
		}
		sc.end = logEnd
		if start > logEnd {
			return &CorruptionError{File: r.path, Offset: logEnd, Reason: fmt.Sprintf(
				"replay starts at offset %d, beyond the end of the log (synced records lost)", start)}
		}
		return nil
	}
}

// groupHeader decodes the group header at off, if a valid one is there.
func (r *fileReader) groupHeader(off int64) (groupHeader, bool, error) {
	b, err := r.at(off, GroupHeaderSize)
	if err != nil || len(b) < GroupHeaderSize {
		return groupHeader{}, false, err
	}
	h, ok, err := decodeGroupHeader(r.id, off, b)
	if err != nil {
		return h, false, &CorruptionError{File: r.path, Offset: off, Reason: err.Error()}
	}
	return h, ok, nil
}

// pin records the previous file's end that the group header at off
// states; all groups of a file must state the same.
func (r *fileReader) pin(off int64, h groupHeader, sc *fileScan) error {
	if h.prevEnd == 0 && sc.hdr.prevID != 0 || h.prevEnd != 0 && sc.hdr.prevID == 0 ||
		sc.hdr.prevEnd != 0 && h.prevEnd != sc.hdr.prevEnd || sc.groupPin >= 0 && h.prevEnd != sc.groupPin {
		return &CorruptionError{File: r.path, Offset: off, Reason: fmt.Sprintf(
			"group header says the previous file ended at offset %d, the file header or an earlier group says otherwise", h.prevEnd)}
	}
	sc.groupPin = h.prevEnd
	sc.groups++
	return nil
}

// groupIntact reports whether the payload of the group at off is all in
// the file and matches its checksum.
func (r *fileReader) groupIntact(off int64, h groupHeader) (bool, error) {
	if off+GroupHeaderSize+h.length > r.size || h.length < RecordHeaderSize {
		return false, nil
	}
	b, err := r.at(off+GroupHeaderSize, int(h.length))
	if err != nil {
		return false, err
	}
	return crc32.Checksum(b, castagnoli) == h.payloadCRC, nil
}

// deliverGroup delivers the records of the intact group at off that end
// after start. Its checksum matched, so every record must be valid and
// fill the payload exactly; anything else was written so (a bug, or a
// newer format) and is reported, never skipped.
func (r *fileReader) deliverGroup(off int64, h groupHeader, start int64, fn ReplayFunc) error {
	pos, end := off+GroupHeaderSize, off+GroupHeaderSize+h.length
	for pos < end {
		size, flags, ok, err := r.record(pos)
		switch {
		case err != nil:
			return err
		case !ok || pos+size > end:
			return &CorruptionError{File: r.path, Offset: pos, Reason: "no valid record here, inside a group whose checksum matches"}
		case flags != 0:
			return &CorruptionError{File: r.path, Offset: pos, Reason: fmt.Sprintf("record flags %#x in a version %d file", flags, FormatVersion)}
		}
		pos += size
		if fn != nil && pos > start {
			if err := fn(Position{File: r.id, Offset: pos}, r.rec); err != nil {
				return err
			}
		}
	}
	return nil
}
