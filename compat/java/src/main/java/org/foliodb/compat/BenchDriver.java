package org.foliodb.compat;

import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.util.ReferenceCounted;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.bookkeeper.client.api.BookKeeper;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.LastConfirmedAndEntry;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerEntry;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.client.api.WriteFlag;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.common.util.OrderedExecutor;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.proto.BookieClientImpl;
import org.apache.bookkeeper.proto.BookieProtocol;
import org.apache.bookkeeper.proto.checksum.DigestManager;
import org.apache.bookkeeper.stats.NullStatsLogger;

/**
 * The Java load generator of the side-by-side benchmark ({@code make bench-compare},
 * compat/harness/benchcompare.go): Apache BookKeeper's own client code driving a cluster, with
 * the same measurements as Folio's Go driver (internal/bench).
 *
 * <p>Usage: {@code BenchDriver <mode> [options]}, modes:
 *
 * <ul>
 *   <li>{@code bookie --bookie HOST:PORT --entry-size N --outstanding N --seconds S --warmup N}: adds
 *       to one bookie with BookieClientImpl (as BenchBookie does), CRC32C bodies built by the 4.17
 *       DigestManager, v3 protocol;
 *   <li>{@code client --uri URI --ensemble E --write-quorum W --ack-quorum A --entry-size N
 *       --outstanding N --seconds S --warmup N}: adds through the BookKeeper client to one ledger;
 *   <li>{@code read --uri URI --ledgers ID,ID,... --batch N [--warmup-ledger ID]}: a catch-up read
 *       of each ledger from entry 0 to its LAC, one reader thread per ledger, N entries per request,
 *       after an unmeasured read of the warm-up ledger;
 *   <li>{@code tail --uri URI --ensemble E --write-quorum W --ack-quorum A --entry-size N --rate R
 *       --seconds S --warmup N [--long-poll-ms 100]}: a writer at R adds/s and, in the same process, a tailing reader
 *       (long-poll readLastAddConfirmedAndEntry); the latency is the lag from an add's completion at
 *       the writer to its delivery by the reader.
 * </ul>
 *
 * <p>Write modes first run {@code --warmup} adds (with at least 256 in flight, so that the JIT of
 * the driver and of the bookies compiles the add path), unmeasured, then print {@code MEASURE start}
 * and measure. Every mode ends with one JSON line: {@code entries}, {@code bytes}, {@code failed},
 * {@code elapsed_ns}, {@code p50_us}, {@code p99_us}, {@code p999_us}, {@code max_us}, and {@code
 * cpu_ns} (this process's CPU time over the measured span). Logs go to stderr.
 */
public final class BenchDriver {
    private static final byte[] PASSWORD = "folio-bench".getBytes(StandardCharsets.UTF_8);
    private static final int WARMUP_OUTSTANDING = 256;

    private final Map<String, String> opts = new HashMap<>();

    /** Latencies in nanoseconds, appended from any thread. */
    static final class Latencies {
        private long[] v = new long[1 << 16];
        private int n;

        synchronized void add(long ns) {
            if (n == v.length) {
                v = Arrays.copyOf(v, n * 2);
            }
            v[n++] = ns;
        }

        synchronized long[] sorted() {
            long[] s = Arrays.copyOf(v, n);
            Arrays.sort(s);
            return s;
        }
    }

    /** What a measured span counted. */
    static final class Tally {
        final Latencies lat = new Latencies();
        final AtomicLong entries = new AtomicLong();
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong lastDone = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>();
        long start;
        long cpuStart;

        void begin() {
            System.out.println("MEASURE start");
            System.out.flush();
            cpuStart = cpuNanos();
            start = System.nanoTime();
        }

        void ok(long latencyNs, long size) {
            lat.add(latencyNs);
            entries.incrementAndGet();
            bytes.addAndGet(size);
            lastDone.accumulateAndGet(System.nanoTime(), Math::max);
        }

        void fail(String why) {
            failed.incrementAndGet();
            firstError.compareAndSet(null, why);
        }

        void report() {
            long cpu = cpuNanos() - cpuStart;
            long end = lastDone.get() == 0 ? System.nanoTime() : lastDone.get();
            long[] s = lat.sorted();
            StringBuilder b = new StringBuilder("{");
            b.append("\"entries\":").append(entries.get());
            b.append(",\"bytes\":").append(bytes.get());
            b.append(",\"failed\":").append(failed.get());
            b.append(",\"elapsed_ns\":").append(end - start);
            b.append(",\"cpu_ns\":").append(cpu);
            b.append(",\"p50_us\":").append(q(s, 0.50));
            b.append(",\"p99_us\":").append(q(s, 0.99));
            b.append(",\"p999_us\":").append(q(s, 0.999));
            b.append(",\"max_us\":").append(s.length == 0 ? 0 : s[s.length - 1] / 1000);
            String err = firstError.get();
            if (err != null) {
                b.append(",\"first_error\":\"").append(err.replace("\\", "\\\\").replace("\"", "'")).append('"');
            }
            b.append('}');
            System.out.println(b);
            System.out.flush();
        }

        static long q(long[] s, double p) {
            if (s.length == 0) {
                return 0;
            }
            return s[Math.min(s.length - 1, (int) (s.length * p))] / 1000;
        }
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private String opt(String name, String def) {
        String v = opts.get(name);
        if (v == null) {
            if (def == null) {
                throw new IllegalArgumentException("missing --" + name);
            }
            return def;
        }
        return v;
    }

    private long num(String name, long def) {
        return Long.parseLong(opt(name, Long.toString(def)));
    }

    static byte[] payload(int size) {
        byte[] p = new byte[size];
        for (int i = 0; i < size; i++) {
            p[i] = (byte) ('a' + i % 26);
        }
        return p;
    }

    // ------------------------------------------------------------------ bookie

    private void bookie() throws Exception {
        String[] hp = opt("bookie", null).split(":");
        BookieId addr = new BookieSocketAddress(hp[0], Integer.parseInt(hp[1])).toBookieId();
        int size = (int) num("entry-size", 1024);
        int outstanding = (int) num("outstanding", 1);
        long seconds = num("seconds", 10);
        long warmup = num("warmup", 20000);

        ClientConfiguration conf = new ClientConfiguration();
        EventLoopGroup eventLoopGroup = new NioEventLoopGroup(1);
        OrderedExecutor executor = OrderedExecutor.newBuilder().name("BenchDriverWorker").numThreads(1).build();
        ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(
                new DefaultThreadFactory("BenchDriverScheduler"));
        BookieClientImpl bc = new BookieClientImpl(conf, eventLoopGroup, UnpooledByteBufAllocator.DEFAULT, executor,
                scheduler, NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
        long ledger = ThreadLocalRandom.current().nextLong(1L << 40, 1L << 50);
        byte[] key = DigestManager.generateMasterKey(PASSWORD);
        DigestManager dm = DigestManager.instantiate(ledger, PASSWORD,
                org.apache.bookkeeper.proto.DataFormats.LedgerMetadataFormat.DigestType.CRC32C,
                UnpooledByteBufAllocator.DEFAULT, false);
        byte[] data = payload(size);
        AtomicLong nextEntry = new AtomicLong();
        AtomicLong lac = new AtomicLong(-1);
        AtomicLong length = new AtomicLong();

        // One add: its body carries the LAC as a writer's would (the highest entry acked so far).
        class Sender {
            void send(Semaphore sem, Tally tally) {
                long e = nextEntry.getAndIncrement();
                long len = length.addAndGet(size);
                ReferenceCounted toSend = dm.computeDigestAndPackageForSending(e, lac.get(), len,
                        Unpooled.wrappedBuffer(data), key, BookieProtocol.FLAG_NONE);
                long t0 = System.nanoTime();
                bc.addEntry(addr, ledger, key, e, toSend, (rc, l, entryId, a, ctx) -> {
                    if (tally != null) {
                        if (rc == 0) {
                            tally.ok(System.nanoTime() - t0, size);
                        } else {
                            tally.fail("add " + entryId + ": rc " + rc);
                        }
                    }
                    lac.accumulateAndGet(entryId, Math::max);
                    sem.release();
                }, null, BookieProtocol.FLAG_NONE, false, EnumSet.noneOf(WriteFlag.class));
            }
        }
        Sender s = new Sender();
        try {
            Semaphore wsem = new Semaphore(WARMUP_OUTSTANDING);
            for (long i = 0; i < warmup; i++) {
                wsem.acquire();
                s.send(wsem, null);
            }
            wsem.acquire(WARMUP_OUTSTANDING);
            Semaphore sem = new Semaphore(outstanding);
            Tally tally = new Tally();
            tally.begin();
            long deadline = tally.start + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < deadline) {
                if (!sem.tryAcquire(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
                    break;
                }
                s.send(sem, tally);
            }
            sem.acquire(outstanding);
            tally.report();
        } finally {
            bc.close();
            scheduler.shutdownNow();
            executor.shutdownNow();
            eventLoopGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    // ------------------------------------------------------------------ client

    private BookKeeper newClient() throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(opt("uri", null));
        conf.setAddEntryTimeout(30);
        conf.setReadEntryTimeout(30);
        conf.setEnforceMinNumRacksPerWriteQuorum(false);
        // The client's own add rate limit (5000/s by default): off, the driver bounds what is in
        // flight itself.
        conf.setThrottleValue(0);
        return BookKeeper.newBuilder(conf).build();
    }

    private WriteHandle create(BookKeeper bk) throws Exception {
        return bk.newCreateLedgerOp()
                .withEnsembleSize((int) num("ensemble", 3))
                .withWriteQuorumSize((int) num("write-quorum", 2))
                .withAckQuorumSize((int) num("ack-quorum", 2))
                .withDigestType(DigestType.CRC32C)
                .withPassword(PASSWORD)
                .execute().get(60, TimeUnit.SECONDS);
    }

    private static void append(WriteHandle wh, byte[] data, Semaphore sem, Tally tally) {
        long t0 = System.nanoTime();
        wh.appendAsync(data).whenComplete((id, err) -> {
            if (tally != null) {
                if (err == null) {
                    tally.ok(System.nanoTime() - t0, data.length);
                } else {
                    tally.fail(err.toString());
                }
            }
            sem.release();
        });
    }

    private void client() throws Exception {
        int size = (int) num("entry-size", 1024);
        int outstanding = (int) num("outstanding", 1);
        long seconds = num("seconds", 10);
        long warmup = num("warmup", 20000);
        BookKeeper bk = newClient();
        WriteHandle wh = create(bk);
        byte[] data = payload(size);
        Semaphore wsem = new Semaphore(WARMUP_OUTSTANDING);
        for (long i = 0; i < warmup; i++) {
            wsem.acquire();
            append(wh, data, wsem, null);
        }
        wsem.acquire(WARMUP_OUTSTANDING);
        Semaphore sem = new Semaphore(outstanding);
        Tally tally = new Tally();
        tally.begin();
        long deadline = tally.start + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (!sem.tryAcquire(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
                break;
            }
            append(wh, data, sem, tally);
        }
        sem.acquire(outstanding);
        tally.report();
        wh.closeAsync().get(60, TimeUnit.SECONDS);
    }

    // ------------------------------------------------------------------ read

    private void read() throws Exception {
        int batch = (int) num("batch", 100);
        BookKeeper bk = newClient();
        List<ReadHandle> handles = new ArrayList<>();
        for (String id : opt("ledgers", null).split(",")) {
            handles.add(bk.newOpenLedgerOp().withLedgerId(Long.parseLong(id.trim())).withRecovery(false)
                    .withPassword(PASSWORD).execute().get(60, TimeUnit.SECONDS));
        }
        // Warm-up: read --warmup-ledger (if given) whole, unmeasured, so that the JIT compiled the
        // read path first.
        String warmLedger = opts.get("warmup-ledger");
        if (warmLedger != null) {
            ReadHandle wrh = bk.newOpenLedgerOp().withLedgerId(Long.parseLong(warmLedger)).withRecovery(false)
                    .withPassword(PASSWORD).execute().get(60, TimeUnit.SECONDS);
            for (long first = 0; first <= wrh.getLastAddConfirmed(); first += batch) {
                wrh.read(first, Math.min(wrh.getLastAddConfirmed(), first + batch - 1)).close();
            }
        }
        Tally tally = new Tally();
        tally.begin();
        List<Thread> readers = new ArrayList<>();
        for (ReadHandle rh : handles) {
            Thread th = new Thread(() -> {
                long last = rh.getLastAddConfirmed();
                for (long first = 0; first <= last; first += batch) {
                    long to = Math.min(last, first + batch - 1);
                    long t0 = System.nanoTime();
                    try (LedgerEntries es = rh.read(first, to)) {
                        long bytes = 0;
                        long n = 0;
                        for (LedgerEntry e : es) {
                            bytes += e.getEntryBuffer().readableBytes();
                            n++;
                        }
                        long lat = System.nanoTime() - t0;
                        tally.lat.add(lat);
                        tally.entries.addAndGet(n);
                        tally.bytes.addAndGet(bytes);
                        tally.lastDone.accumulateAndGet(System.nanoTime(), Math::max);
                    } catch (Exception e) {
                        tally.failed.addAndGet(last - first + 1);
                        tally.firstError.compareAndSet(null, "ledger " + rh.getId() + " read " + first + ": " + e);
                        return;
                    }
                }
            }, "reader-" + rh.getId());
            th.start();
            readers.add(th);
        }
        for (Thread th : readers) {
            th.join();
        }
        tally.report();
    }

    // ------------------------------------------------------------------ tail

    private void tail() throws Exception {
        int size = (int) num("entry-size", 1024);
        double rate = Double.parseDouble(opt("rate", "1000"));
        long seconds = num("seconds", 10);
        long warmup = num("warmup", 20000);
        // The long poll goes to one bookie, which learns a new LAC only from the entries it
        // stores: after the writer's last add, a poll may wait out its timeout before the reader
        // asks again. Short, so that the end of the run is not a timeout.
        long longPollMs = num("long-poll-ms", 100);
        BookKeeper bk = newClient();
        byte[] data = payload(size);
        // Warm-up on a ledger of its own, so that the measured ledger's entries all count.
        WriteHandle warm = create(bk);
        Semaphore wsem = new Semaphore(WARMUP_OUTSTANDING);
        for (long i = 0; i < warmup; i++) {
            wsem.acquire();
            append(warm, data, wsem, null);
        }
        wsem.acquire(WARMUP_OUTSTANDING);
        warm.closeAsync().get(60, TimeUnit.SECONDS);

        WriteHandle wh = create(bk);
        ReadHandle rh = bk.newOpenLedgerOp().withLedgerId(wh.getId()).withRecovery(false)
                .withPassword(PASSWORD).execute().get(60, TimeUnit.SECONDS);
        int cap = (int) Math.min(Integer.MAX_VALUE - 8, (long) (rate * seconds * 1.5) + 1024);
        long[] ackedAt = new long[cap];
        Tally tally = new Tally();
        Tally writes = new Tally();
        tally.begin();
        writes.start = tally.start;
        Thread reader = new Thread(() -> {
            long next = 0;
            while (true) {
                if (writerDone && next > finalTarget) {
                    return;
                }
                try {
                    LastConfirmedAndEntry lce = rh.readLastAddConfirmedAndEntryAsync(next, longPollMs, false)
                            .get(30, TimeUnit.SECONDS);
                    long lac = lce.getLastAddConfirmed();
                    if (lce.hasEntry()) {
                        deliver(tally, ackedAt, next, lce.getEntry().getEntryBuffer().readableBytes());
                        next++;
                    }
                    lce.close();
                    if (lac >= next) {
                        try (LedgerEntries es = rh.readUnconfirmed(next, lac)) {
                            for (LedgerEntry e : es) {
                                deliver(tally, ackedAt, e.getEntryId(), e.getEntryBuffer().readableBytes());
                            }
                        }
                        next = lac + 1;
                    }
                } catch (Exception e) {
                    tally.fail("tail at " + next + ": " + e);
                    return;
                }
            }
        }, "tailer");
        reader.start();
        Semaphore sem = new Semaphore(1000);
        long deadline = tally.start + TimeUnit.SECONDS.toNanos(seconds);
        for (long n = 0; ; n++) {
            long due = tally.start + (long) (n / rate * 1e9);
            long now = System.nanoTime();
            if (due >= deadline || now >= deadline) {
                break;
            }
            if (due > now) {
                TimeUnit.NANOSECONDS.sleep(due - now); // pacing to the target rate
            }
            sem.acquire();
            lacAtLastSend = wh.getLastAddConfirmed();
            long t0 = System.nanoTime();
            wh.appendAsync(data).whenComplete((id, err) -> {
                if (err == null) {
                    long at = System.nanoTime();
                    if (id < ackedAt.length) {
                        ackedAt[(int) (long) id] = at;
                    }
                    writes.ok(at - t0, data.length);
                } else {
                    writes.fail(err.toString());
                }
                sem.release();
            });
        }
        sem.acquire(1000);
        // An entry becomes visible to readers with a later add's LAC: the reader is waited for
        // until it delivered every entry the writer's last add made visible (as Folio's Tail
        // does); the ledger is closed after that, so that closing does not count as a delivery.
        finalTarget = lacAtLastSend;
        writerDone = true;
        reader.join(TimeUnit.SECONDS.toMillis(60));
        if (reader.isAlive()) {
            tally.fail("tailing reader did not deliver every visible entry within 60 s");
        }
        wh.closeAsync().get(60, TimeUnit.SECONDS);
        tally.failed.addAndGet(writes.failed.get());
        tally.report();
    }

    private volatile boolean writerDone;
    private volatile long finalTarget = Long.MAX_VALUE;
    private volatile long lacAtLastSend = -1;

    private static void deliver(Tally tally, long[] ackedAt, long id, long size) {
        long now = System.nanoTime();
        long acked = id < ackedAt.length ? ackedAt[(int) id] : 0;
        // The writer's completion may run just after the reader saw the entry: count 0 then.
        long lag = acked == 0 ? 0 : Math.max(0, now - acked);
        tally.ok(lag, size);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: BenchDriver bookie|client|read|tail [--name value]...");
            System.exit(2);
        }
        BenchDriver d = new BenchDriver();
        for (int i = 1; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                System.err.println("BenchDriver: unexpected argument " + args[i]);
                System.exit(2);
            }
            d.opts.put(args[i].substring(2), args[i + 1]);
        }
        switch (args[0]) {
            case "bookie" -> d.bookie();
            case "client" -> d.client();
            case "read" -> d.read();
            case "tail" -> d.tail();
            default -> {
                System.err.println("BenchDriver: unknown mode " + args[0]);
                System.exit(2);
            }
        }
        // The BookKeeper client's pools take seconds to shut down; the result is printed.
        System.exit(0);
    }
}
