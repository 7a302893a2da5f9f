package org.foliodb.compat;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.ReferenceCounted;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.api.BKException.Code;
import org.apache.bookkeeper.client.api.WriteFlag;
import org.apache.bookkeeper.common.util.OrderedExecutor;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.proto.BookieClientImpl;
import org.apache.bookkeeper.proto.BookieProtocol;
import org.apache.bookkeeper.proto.BookkeeperInternalCallbacks.ReadEntryCallbackCtx;
import org.apache.bookkeeper.proto.DataFormats.LedgerMetadataFormat.DigestType;
import org.apache.bookkeeper.proto.checksum.DigestManager;
import org.apache.bookkeeper.stats.NullStatsLogger;
import org.apache.bookkeeper.util.AvailabilityOfEntriesOfLedger;
import org.apache.bookkeeper.util.ByteBufList;

/**
 * Smoke test of one bookie with Apache BookKeeper's own low-level bookie client
 * (BookieClientImpl, the code a Java LedgerHandle uses underneath) and its own
 * DigestManager: adds, reads, LAC, long poll, fencing, recovery adds, master
 * key checks and (v2) batch reads, in the wire mode given on the command line.
 *
 * <p>Usage: {@code BookieSmoke --bookie HOST:PORT --protocol v3|v2 [--ledger-base N] [--entries N]}
 *
 * <p>Prints one line per step, {@code PASS <mode> <step>} or
 * {@code FAIL <mode> <step>: <why>}, and exits 1 if any step failed.
 */
public final class BookieSmoke {
    private static final long TIMEOUT_SECONDS = 15;
    private static final int FLAGS_RECOVERY = BookieProtocol.FLAG_RECOVERY_ADD | BookieProtocol.FLAG_HIGH_PRIORITY;

    private final String mode;
    private final boolean v2;
    private final BookieClientImpl bc;
    private final BookieId addr;
    private final long base;
    private final int n;
    private int failures;
    private int passes;

    private BookieSmoke(String mode, BookieClientImpl bc, BookieId addr, long base, int n) {
        this.mode = mode;
        this.v2 = mode.equals("v2");
        this.bc = bc;
        this.addr = addr;
        this.base = base;
        this.n = n;
    }

    // ---------------------------------------------------------------- results

    record AddResult(int rc, long ledgerId, long entryId) {}

    record ReadResult(int rc, long ledgerId, long entryId, byte[] body, long maxLac) {}

    record LacResult(int rc, long ledgerId, byte[] lacBody, byte[] lastEntryBody) {}

    record BatchResult(int rc, long ledgerId, long startEntryId, List<byte[]> bodies) {}

    /** Context of a read: receives the piggybacked maxLAC of a v3 response. */
    static final class ReadCtx implements ReadEntryCallbackCtx {
        volatile long lac = Long.MIN_VALUE;

        @Override
        public void setLastAddConfirmed(long lac) {
            this.lac = lac;
        }

        @Override
        public long getLastAddConfirmed() {
            return lac;
        }
    }

    /** An entry as the 4.17 client's DigestManager packages it. */
    static final class Entry {
        final long ledgerId;
        final long entryId;
        final byte[] payload;
        final byte[] body; // the entry body (§5.1), what a read must return byte for byte
        final ReferenceCounted toSend;

        Entry(long ledgerId, long entryId, byte[] payload, byte[] body, ReferenceCounted toSend) {
            this.ledgerId = ledgerId;
            this.entryId = entryId;
            this.payload = payload;
            this.body = body;
            this.toSend = toSend;
        }
    }

    static byte[] bytes(ByteBuf b) {
        if (b == null) {
            return null;
        }
        return ByteBufUtil.getBytes(b, b.readerIndex(), b.readableBytes(), true);
    }

    static byte[] bytes(ReferenceCounted rc) {
        if (rc instanceof ByteBufList list) {
            return bytes(ByteBufList.coalesce(list));
        }
        return bytes((ByteBuf) rc);
    }

    Entry entry(DigestManager dm, byte[] key, long ledgerId, long entryId, long lac, long length,
                byte[] payload, int flags) {
        ReferenceCounted toSend = dm.computeDigestAndPackageForSending(entryId, lac, length,
                Unpooled.wrappedBuffer(payload), key, flags);
        byte[] all = bytes(toSend);
        // v2: the DigestManager builds the whole frame: length, header, 20-byte key, then the body.
        byte[] body = v2 ? Arrays.copyOfRange(all, 4 + 4 + BookieProtocol.MASTER_KEY_LENGTH, all.length) : all;
        return new Entry(ledgerId, entryId, payload, body, toSend);
    }

    DigestManager digest(long ledgerId, byte[] password, DigestType type) throws Exception {
        return DigestManager.instantiate(ledgerId, password, type, UnpooledByteBufAllocator.DEFAULT, v2);
    }

    // ---------------------------------------------------------------- async calls

    CompletableFuture<AddResult> add(Entry e, byte[] key, int flags) {
        CompletableFuture<AddResult> f = new CompletableFuture<>();
        bc.addEntry(addr, e.ledgerId, key, e.entryId, e.toSend,
                (rc, ledgerId, entryId, a, ctx) -> f.complete(new AddResult(rc, ledgerId, entryId)),
                null, flags, false, EnumSet.noneOf(WriteFlag.class));
        return f;
    }

    CompletableFuture<ReadResult> read(long ledgerId, long entryId, int flags, byte[] key) {
        CompletableFuture<ReadResult> f = new CompletableFuture<>();
        ReadCtx rctx = new ReadCtx();
        bc.readEntry(addr, ledgerId, entryId,
                (rc, l, e, buf, ctx) -> f.complete(new ReadResult(rc, l, e, rc == 0 ? bytes(buf) : null, rctx.lac)),
                rctx, flags, key, false);
        return f;
    }

    CompletableFuture<ReadResult> longPoll(long ledgerId, long previousLac, long timeoutMs) {
        CompletableFuture<ReadResult> f = new CompletableFuture<>();
        ReadCtx rctx = new ReadCtx();
        bc.readEntryWaitForLACUpdate(addr, ledgerId, BookieProtocol.LAST_ADD_CONFIRMED, previousLac, timeoutMs, true,
                (rc, l, e, buf, ctx) -> f.complete(new ReadResult(rc, l, e, rc == 0 ? bytes(buf) : null, rctx.lac)),
                rctx);
        return f;
    }

    CompletableFuture<LacResult> readLac(long ledgerId) {
        CompletableFuture<LacResult> f = new CompletableFuture<>();
        bc.readLac(addr, ledgerId,
                (rc, l, lac, last, ctx) -> f.complete(new LacResult(rc, l, bytes(lac), bytes(last))), null);
        return f;
    }

    CompletableFuture<Integer> writeLac(DigestManager dm, long ledgerId, byte[] key, long lac) {
        CompletableFuture<Integer> f = new CompletableFuture<>();
        bc.writeLac(addr, ledgerId, key, lac, dm.computeDigestAndPackageForSendingLac(lac),
                (rc, l, a, ctx) -> f.complete(rc), null);
        return f;
    }

    CompletableFuture<BatchResult> batchRead(long ledgerId, long start, int maxCount, long maxSize) {
        CompletableFuture<BatchResult> f = new CompletableFuture<>();
        bc.batchReadEntries(addr, ledgerId, start, maxCount, maxSize, (rc, l, s, list, ctx) -> {
            List<byte[]> bodies = new ArrayList<>();
            if (rc == 0 && list != null) {
                for (int i = 0; i < list.size(); i++) {
                    bodies.add(bytes(list.getBuffer(i)));
                }
            }
            f.complete(new BatchResult(rc, l, s, bodies));
        }, null, BookieProtocol.FLAG_NONE, null, false);
        return f;
    }

    CompletableFuture<long[]> bookieInfo() {
        CompletableFuture<long[]> f = new CompletableFuture<>();
        bc.getBookieInfo(addr, 3, (rc, info, ctx) -> f.complete(rc == 0
                ? new long[] {rc, info.getTotalDiskSpace(), info.getFreeDiskSpace()} : new long[] {rc, 0, 0}), null);
        return f;
    }

    CompletableFuture<Integer> forceLedger(long ledgerId) {
        CompletableFuture<Integer> f = new CompletableFuture<>();
        bc.forceLedger(addr, ledgerId, (rc, l, a, ctx) -> f.complete(rc), null);
        return f;
    }

    static <T> T await(CompletableFuture<T> f) throws Exception {
        return f.get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    // ---------------------------------------------------------------- reporting

    /** Thrown by a check to fail the current step. */
    static final class StepFailure extends Exception {
        StepFailure(String msg) {
            super(msg);
        }
    }

    interface Body {
        void run() throws Exception;
    }

    void step(String name, Body body) {
        long start = System.nanoTime();
        try {
            body.run();
            passes++;
            System.out.println("PASS " + mode + " " + name + " (" + (System.nanoTime() - start) / 1_000_000 + " ms)");
        } catch (StepFailure e) {
            failures++;
            System.out.println("FAIL " + mode + " " + name + ": " + e.getMessage());
        } catch (Exception e) {
            failures++;
            System.out.println("FAIL " + mode + " " + name + ": " + e);
            e.printStackTrace(System.err);
        }
        System.out.flush();
    }

    static void expect(boolean ok, String fmt, Object... args) throws StepFailure {
        if (!ok) {
            throw new StepFailure(String.format(fmt, args));
        }
    }

    static String hex(byte[] b) {
        if (b == null) {
            return "null";
        }
        String h = HexFormat.of().formatHex(b, 0, Math.min(b.length, 64));
        return b.length > 64 ? h + "...(" + b.length + " bytes)" : h;
    }

    /** Checks a successful read of e: status, echoed ids, byte-exact body, the Java client's digest check. */
    static void expectEntry(String what, ReadResult r, Entry e, long requestedEntryId, DigestManager dm)
            throws Exception {
        expect(r.rc == Code.OK, "%s: rc %d, want 0", what, r.rc);
        expect(r.ledgerId == e.ledgerId && r.entryId == requestedEntryId,
                "%s: response ids (%d,%d), want (%d,%d)", what, r.ledgerId, r.entryId, e.ledgerId, requestedEntryId);
        expect(Arrays.equals(r.body, e.body), "%s: body differs from what was added:\n got  %s\n want %s",
                what, hex(r.body), hex(e.body));
        try {
            ByteBuf data = dm.verifyDigestAndReturnData(e.entryId, Unpooled.wrappedBuffer(r.body));
            expect(Arrays.equals(bytes(data), e.payload), "%s: payload after digest check differs", what);
        } catch (org.apache.bookkeeper.client.BKException.BKDigestMatchException ex) {
            throw new StepFailure(what + ": DigestManager rejects the body: " + ex);
        }
    }

    // ---------------------------------------------------------------- the test

    private static byte[] payload(Random rnd, int size) {
        byte[] p = new byte[size];
        rnd.nextBytes(p);
        return p;
    }

    void run() throws Exception {
        final byte[] password = "folio-compat".getBytes(StandardCharsets.UTF_8);
        final byte[] key = DigestManager.generateMasterKey(password);
        final byte[] wrongKey = DigestManager.generateMasterKey("not-the-password".getBytes(StandardCharsets.UTF_8));
        final long ledger = base;              // main ledger, CRC32C
        final long fenceFirstLedger = base + 5; // fenced before any add
        final long unknownLedger = base + 7;   // never written
        final DigestManager dm = digest(ledger, password, DigestType.CRC32C);
        final Random rnd = new Random(ledger);
        final List<Entry> entries = new ArrayList<>();

        // 1. n adds, all in flight at once, LAC = id-1, cumulative length.
        step("add entries 0.." + (n - 1) + " pipelined (incl. empty, 200 KiB and 1 MiB payloads)", () -> {
            long length = 0;
            for (int i = 0; i < n; i++) {
                int size = switch (i) {
                    case 0 -> 0;
                    case 1 -> 1;
                    case 2 -> 200 * 1024;
                    case 3 -> 1024 * 1024;
                    default -> 1 + rnd.nextInt(2000);
                };
                byte[] p = payload(rnd, size);
                length += size;
                entries.add(entry(dm, key, ledger, i, i - 1, length, p, BookieProtocol.FLAG_NONE));
            }
            List<CompletableFuture<AddResult>> fs = new ArrayList<>();
            for (Entry e : entries) {
                fs.add(add(e, key, BookieProtocol.FLAG_NONE));
            }
            for (int i = 0; i < n; i++) {
                AddResult r = await(fs.get(i));
                expect(r.rc == Code.OK, "entry %d: rc %d, want 0", i, r.rc);
                expect(r.ledgerId == ledger && r.entryId == i, "entry %d: response ids (%d,%d)", i, r.ledgerId,
                        r.entryId);
            }
        });

        step("read each entry back byte-exact (pipelined), DigestManager verifies", () -> {
            expect(entries.size() == n, "adds did not complete");
            List<CompletableFuture<ReadResult>> fs = new ArrayList<>();
            for (Entry e : entries) {
                fs.add(read(ledger, e.entryId, BookieProtocol.FLAG_NONE, null));
            }
            for (int i = 0; i < n; i++) {
                expectEntry("entry " + i, await(fs.get(i)), entries.get(i), i, dm);
            }
        });

        step("read entry -1 returns the last entry", () -> {
            ReadResult r = await(read(ledger, BookieProtocol.LAST_ADD_CONFIRMED, BookieProtocol.FLAG_NONE, null));
            expectEntry("entry -1", r, entries.get(n - 1), BookieProtocol.LAST_ADD_CONFIRMED, dm);
            DigestManager.RecoveryData rd = dm.verifyDigestAndReturnLastConfirmed(Unpooled.wrappedBuffer(r.body));
            expect(rd.getLastAddConfirmed() == n - 2, "LAC in last entry %d, want %d", rd.getLastAddConfirmed(), n - 2);
        });

        step("read of a missing entry gives NoSuchEntry (-13)", () -> {
            ReadResult r = await(read(ledger, n + 10, BookieProtocol.FLAG_NONE, null));
            expect(r.rc == Code.NoSuchEntryException, "rc %d, want %d", r.rc, Code.NoSuchEntryException);
        });

        step("read of an unknown ledger gives NoSuchLedgerExists (-7)", () -> {
            ReadResult r = await(read(unknownLedger, 0, BookieProtocol.FLAG_NONE, null));
            expect(r.rc == Code.NoSuchLedgerExistsException, "rc %d, want %d", r.rc,
                    Code.NoSuchLedgerExistsException);
        });

        step("READ_LAC returns the last entry body" + (v2 ? " (over the client's extra v3 connection)" : ""), () -> {
            LacResult r = await(readLac(ledger));
            expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
            expect(r.ledgerId == ledger, "ledgerId %d", r.ledgerId);
            expect(r.lacBody == null || r.lacBody.length == 0, "lacBody before any WRITE_LAC: %s", hex(r.lacBody));
            expect(Arrays.equals(r.lastEntryBody, entries.get(n - 1).body), "lastEntryBody %s, want %s",
                    hex(r.lastEntryBody), hex(entries.get(n - 1).body));
            long lac = dm.verifyDigestAndReturnLastConfirmed(Unpooled.wrappedBuffer(r.lastEntryBody))
                    .getLastAddConfirmed();
            expect(lac == n - 2, "LAC %d, want %d", lac, n - 2);
        });

        step("WRITE_LAC then READ_LAC returns the explicit LAC body", () -> {
            int rc = await(writeLac(dm, ledger, key, n - 1));
            expect(rc == Code.OK, "WRITE_LAC rc %d, want 0", rc);
            LacResult r = await(readLac(ledger));
            expect(r.rc == Code.OK, "READ_LAC rc %d, want 0", r.rc);
            expect(r.lacBody != null && r.lacBody.length > 0, "no lacBody after WRITE_LAC");
            long lac = dm.verifyDigestAndReturnLac(Unpooled.wrappedBuffer(r.lacBody));
            expect(lac == n - 1, "explicit LAC %d, want %d", lac, n - 1);
        });

        step("READ_LAC of an unknown ledger gives NoSuchEntry (-13) or NoSuchLedger (-7)", () -> {
            LacResult r = await(readLac(unknownLedger));
            expect(r.rc == Code.NoSuchEntryException || r.rc == Code.NoSuchLedgerExistsException,
                    "rc %d, want %d or %d", r.rc, Code.NoSuchEntryException, Code.NoSuchLedgerExistsException);
        });

        step("GET_BOOKIE_INFO" + (v2 ? " (over the client's extra v3 connection)" : ""), () -> {
            long[] r = await(bookieInfo());
            expect(r[0] == Code.OK, "rc %d, want 0", r[0]);
            expect(r[1] > 0 && r[2] >= 0 && r[2] <= r[1], "total %d free %d", r[1], r[2]);
        });

        step("add and read an entry near the 5 MiB frame limit (5,200,000-byte payload)", () -> {
            long l = base + 8;
            DigestManager d = digest(l, password, DigestType.CRC32C);
            byte[] p = payload(rnd, 5_200_000);
            Entry e = entry(d, key, l, 0, -1, p.length, p, BookieProtocol.FLAG_NONE);
            AddResult a = await(add(e, key, BookieProtocol.FLAG_NONE));
            expect(a.rc == Code.OK, "add rc %d, want 0", a.rc);
            expectEntry("entry 0", await(read(l, 0, BookieProtocol.FLAG_NONE, null)), e, 0, d);
        });

        if (!v2) {
            step("FORCE_LEDGER", () -> {
                int rc = await(forceLedger(ledger));
                expect(rc == Code.OK, "rc %d, want 0", rc);
            });
            step("GET_LIST_OF_ENTRIES_OF_LEDGER lists entries 0.." + (n - 1), () -> {
                AvailabilityOfEntriesOfLedger av = bc.getListOfEntriesOfLedger(addr, ledger)
                        .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
                expect(av.getTotalNumOfAvailableEntries() == n, "%d entries available, want %d",
                        av.getTotalNumOfAvailableEntries(), n);
                for (int i = 0; i < n; i++) {
                    expect(av.isEntryAvailable(i), "entry %d not listed", i);
                }
                expect(!av.isEntryAvailable(n), "entry %d listed", n);
            });
            step("long-poll read waiting for the LAC returns when an add raises it", () -> {
                long l = base + 6;
                DigestManager d = digest(l, password, DigestType.CRC32C);
                List<Entry> es = new ArrayList<>();
                long length = 0;
                for (int i = 0; i < 3; i++) {
                    byte[] p = payload(rnd, 50);
                    length += p.length;
                    es.add(entry(d, key, l, i, i - 1, length, p, BookieProtocol.FLAG_NONE));
                }
                for (int i = 0; i < 2; i++) {
                    AddResult a = await(add(es.get(i), key, BookieProtocol.FLAG_NONE));
                    expect(a.rc == Code.OK, "add %d rc %d", i, a.rc);
                }
                // The bookie's LAC is now 0 (from entry 1's header); wait for more.
                CompletableFuture<ReadResult> poll = longPoll(l, 0, 4000);
                Thread.sleep(200);
                expect(!poll.isDone(), "long poll answered before the LAC moved: %s", poll.getNow(null));
                AddResult a = await(add(es.get(2), key, BookieProtocol.FLAG_NONE));
                expect(a.rc == Code.OK, "add 2 rc %d", a.rc);
                ReadResult r = await(poll);
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.maxLac == 1, "maxLAC %d, want 1", r.maxLac);
                expectEntry("piggybacked entry", r, es.get(1), 1, d);
            });
        }

        if (!v2) {
            step("long-poll read (previousLAC below the bookie's LAC) piggybacks the next entry", () -> {
                ReadResult r = await(longPoll(ledger, n - 2, 2000));
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.maxLac == n - 1, "maxLAC %d, want %d", r.maxLac, n - 1);
                expectEntry("piggybacked entry", r, entries.get(n - 1), n - 1, dm);
            });
            step("long-poll read times out with no new entry", () -> {
                ReadResult r = await(longPoll(ledger, n - 1, 300));
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.entryId == BookieProtocol.LAST_ADD_CONFIRMED, "entryId %d, want -1 (nothing piggybacked)",
                        r.entryId);
                expect(r.maxLac == n - 1, "maxLAC %d, want %d", r.maxLac, n - 1);
            });
        }

        step("add with a wrong master key gives Unauthorized (-102)", () -> {
            Entry e = entry(dm, wrongKey, ledger, n, n - 1, 0, payload(rnd, 10), BookieProtocol.FLAG_NONE);
            AddResult r = await(add(e, wrongKey, BookieProtocol.FLAG_NONE));
            expect(r.rc == Code.UnauthorizedAccessException, "rc %d, want %d", r.rc, Code.UnauthorizedAccessException);
        });

        step("fence with a wrong master key gives Unauthorized (-102) and does not fence", () -> {
            ReadResult r = await(read(ledger, BookieProtocol.LAST_ADD_CONFIRMED, BookieProtocol.FLAG_DO_FENCING,
                    wrongKey));
            expect(r.rc == Code.UnauthorizedAccessException, "fence rc %d, want %d", r.rc,
                    Code.UnauthorizedAccessException);
            long length = 0;
            for (Entry e : entries) {
                length += e.payload.length;
            }
            byte[] p = payload(rnd, 100);
            Entry e = entry(dm, key, ledger, n, n - 1, length + p.length, p, BookieProtocol.FLAG_NONE);
            AddResult a = await(add(e, key, BookieProtocol.FLAG_NONE));
            expect(a.rc == Code.OK, "add %d after the refused fence: rc %d, want 0", n, a.rc);
            entries.add(e);
        });

        step("fence (read -1 with fence flag and key) returns the last entry", () -> {
            ReadResult r = await(read(ledger, BookieProtocol.LAST_ADD_CONFIRMED, BookieProtocol.FLAG_DO_FENCING, key));
            expectEntry("fence read", r, entries.get(entries.size() - 1), BookieProtocol.LAST_ADD_CONFIRMED, dm);
        });

        final long next = entries.size();
        step("normal add after fence gives LedgerFenced (-101)", () -> {
            Entry e = entry(dm, key, ledger, next, next - 1, 0, payload(rnd, 10), BookieProtocol.FLAG_NONE);
            AddResult r = await(add(e, key, BookieProtocol.FLAG_NONE));
            expect(r.rc == Code.LedgerFencedException, "rc %d, want %d", r.rc, Code.LedgerFencedException);
        });

        step("recovery add with a wrong key after fence gives Unauthorized (-102)", () -> {
            Entry e = entry(dm, wrongKey, ledger, next, next - 1, 0, payload(rnd, 10), FLAGS_RECOVERY);
            AddResult r = await(add(e, wrongKey, FLAGS_RECOVERY));
            expect(r.rc == Code.UnauthorizedAccessException, "rc %d, want %d", r.rc, Code.UnauthorizedAccessException);
        });

        step("recovery add after fence succeeds and reads back", () -> {
            byte[] p = payload(rnd, 300);
            Entry e = entry(dm, key, ledger, next, next - 1, 12345, p, FLAGS_RECOVERY);
            AddResult r = await(add(e, key, FLAGS_RECOVERY));
            expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
            expect(r.ledgerId == ledger && r.entryId == next, "response ids (%d,%d)", r.ledgerId, r.entryId);
            entries.add(e);
            expectEntry("entry " + next, await(read(ledger, next, BookieProtocol.FLAG_NONE, null)), e, next, dm);
        });

        step("recovery re-add of an existing entry succeeds", () -> {
            Entry old = entries.get(5);
            // Same payload, LAC and length as the original: the same body, sent as a recovery add.
            Entry again = entry(dm, key, ledger, 5, 4, lengthUpTo(entries, 5), old.payload, FLAGS_RECOVERY);
            expect(Arrays.equals(again.body, old.body), "test bug: re-digested body differs");
            AddResult r = await(add(again, key, FLAGS_RECOVERY));
            expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
            expectEntry("entry 5", await(read(ledger, 5, BookieProtocol.FLAG_NONE, null)), old, 5, dm);
        });

        step("reads and entry -1 still work on the fenced ledger", () -> {
            expectEntry("entry 0", await(read(ledger, 0, BookieProtocol.FLAG_NONE, null)), entries.get(0), 0, dm);
            expectEntry("entry -1", await(read(ledger, -1, BookieProtocol.FLAG_NONE, null)),
                    entries.get(entries.size() - 1), -1, dm);
        });

        step("fence of a ledger the bookie never saw: NoSuchEntry/NoSuchLedger, then normal add -101,"
                + " recovery add OK", () -> {
            DigestManager dm2 = digest(fenceFirstLedger, password, DigestType.CRC32C);
            ReadResult r = await(read(fenceFirstLedger, -1, BookieProtocol.FLAG_DO_FENCING, key));
            expect(r.rc == Code.NoSuchEntryException || r.rc == Code.NoSuchLedgerExistsException,
                    "fence rc %d, want %d or %d", r.rc, Code.NoSuchEntryException, Code.NoSuchLedgerExistsException);
            byte[] p = payload(rnd, 10);
            AddResult a = await(add(entry(dm2, key, fenceFirstLedger, 0, -1, 10, p, BookieProtocol.FLAG_NONE), key,
                    BookieProtocol.FLAG_NONE));
            expect(a.rc == Code.LedgerFencedException, "normal add rc %d, want %d", a.rc, Code.LedgerFencedException);
            Entry e = entry(dm2, key, fenceFirstLedger, 0, -1, 10, p, FLAGS_RECOVERY);
            a = await(add(e, key, FLAGS_RECOVERY));
            expect(a.rc == Code.OK, "recovery add rc %d, want 0", a.rc);
            expectEntry("entry 0", await(read(fenceFirstLedger, 0, BookieProtocol.FLAG_NONE, null)), e, 0, dm2);
        });

        DigestType[] types = {DigestType.CRC32, DigestType.HMAC, DigestType.DUMMY};
        for (int t = 0; t < types.length; t++) {
            final DigestType type = types[t];
            final long l = base + 1 + t;
            step("digest " + type + ": add 5 entries, read each and -1 byte-exact", () -> {
                DigestManager d = digest(l, password, type);
                List<Entry> es = new ArrayList<>();
                List<CompletableFuture<AddResult>> fs = new ArrayList<>();
                long length = 0;
                for (int i = 0; i < 5; i++) {
                    byte[] p = payload(rnd, i * 37);
                    length += p.length;
                    Entry e = entry(d, key, l, i, i - 1, length, p, BookieProtocol.FLAG_NONE);
                    es.add(e);
                    fs.add(add(e, key, BookieProtocol.FLAG_NONE));
                }
                for (int i = 0; i < 5; i++) {
                    AddResult r = await(fs.get(i));
                    expect(r.rc == Code.OK, "add %d: rc %d", i, r.rc);
                }
                for (int i = 0; i < 5; i++) {
                    expectEntry("entry " + i, await(read(l, i, BookieProtocol.FLAG_NONE, null)), es.get(i), i, d);
                }
                expectEntry("entry -1", await(read(l, -1, BookieProtocol.FLAG_NONE, null)), es.get(4), -1, d);
            });
        }

        if (v2) {
            final int total = entries.size();
            step("batch read of every entry (v2 BATCH_READ_ENTRY)", () -> {
                BatchResult r = await(batchRead(ledger, 0, total, 5L * 1024 * 1024));
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.bodies.size() == total, "%d entries, want %d", r.bodies.size(), total);
                for (int i = 0; i < total; i++) {
                    expect(Arrays.equals(r.bodies.get(i), entries.get(i).body), "entry %d differs: got %s want %s",
                            i, hex(r.bodies.get(i)), hex(entries.get(i).body));
                }
            });
            step("batch read maxCount=3 from entry 10", () -> {
                BatchResult r = await(batchRead(ledger, 10, 3, 5L * 1024 * 1024));
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.bodies.size() == 3, "%d entries, want 3", r.bodies.size());
                for (int i = 0; i < 3; i++) {
                    expect(Arrays.equals(r.bodies.get(i), entries.get(10 + i).body), "entry %d differs", 10 + i);
                }
            });
            step("batch read limited by maxSize still returns the first entry", () -> {
                BatchResult r = await(batchRead(ledger, 2, 10, 1024)); // entry 2 alone is 200 KiB
                expect(r.rc == Code.OK, "rc %d, want 0", r.rc);
                expect(r.bodies.size() == 1, "%d entries, want 1", r.bodies.size());
                expect(Arrays.equals(r.bodies.get(0), entries.get(2).body), "entry 2 differs");
            });
            step("batch read past the end gives NoSuchEntry (-13)", () -> {
                BatchResult r = await(batchRead(ledger, total + 100, 5, 5L * 1024 * 1024));
                expect(r.rc == Code.NoSuchEntryException, "rc %d, want %d", r.rc, Code.NoSuchEntryException);
            });
        }
    }

    private static long lengthUpTo(List<Entry> entries, int id) {
        long length = 0;
        for (int i = 0; i <= id; i++) {
            length += entries.get(i).payload.length;
        }
        return length;
    }

    public static void main(String[] args) throws Exception {
        String bookie = null;
        String mode = "v3";
        long base = System.currentTimeMillis() * 1000;
        int n = 64;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bookie" -> bookie = args[++i];
                case "--protocol" -> mode = args[++i];
                case "--ledger-base" -> base = Long.parseLong(args[++i]);
                case "--entries" -> n = Integer.parseInt(args[++i]);
                default -> {
                    System.err.println("unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        if (bookie == null || !(mode.equals("v2") || mode.equals("v3")) || n < 16) {
            System.err.println("usage: BookieSmoke --bookie HOST:PORT --protocol v3|v2 [--ledger-base N] "
                    + "[--entries N>=16]");
            System.exit(2);
        }
        String[] hp = bookie.split(":");
        BookieId addr = new BookieSocketAddress(hp[0], Integer.parseInt(hp[1])).toBookieId();

        ClientConfiguration conf = new ClientConfiguration();
        conf.setUseV2WireProtocol(mode.equals("v2"));
        EventLoopGroup eventLoopGroup = new NioEventLoopGroup(1);
        OrderedExecutor executor = OrderedExecutor.newBuilder().name("BookieSmokeWorker").numThreads(1).build();
        ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(
                new DefaultThreadFactory("BookieSmokeScheduler"));
        BookieClientImpl bc = new BookieClientImpl(conf, eventLoopGroup, UnpooledByteBufAllocator.DEFAULT, executor,
                scheduler, NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
        System.out.println("BookieSmoke: Apache BookKeeper " + BookieClientImpl.class.getPackage().getImplementationVersion() + " BookieClientImpl, bookie " + bookie + ", protocol " + mode
                + ", ledgers from " + base);
        BookieSmoke s = new BookieSmoke(mode, bc, addr, base, n);
        try {
            s.run();
        } finally {
            bc.close();
            scheduler.shutdownNow();
            executor.shutdownNow();
            eventLoopGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
        System.out.printf("%s %s: %d passed, %d failed%n", s.failures == 0 ? "PASS" : "FAIL", mode, s.passes,
                s.failures);
        System.out.flush();
        System.exit(s.failures == 0 ? 0 : 1);
    }
}
