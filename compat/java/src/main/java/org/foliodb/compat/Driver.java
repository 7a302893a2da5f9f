package org.foliodb.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.api.BKException;
import org.apache.bookkeeper.client.api.BookKeeper;
import org.apache.bookkeeper.client.api.CreateAdvBuilder;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.LastConfirmedAndEntry;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerEntry;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.client.api.WriteAdvHandle;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;

/**
 * A Java BookKeeper client (Apache BookKeeper's own org.apache.bookkeeper.client.api, on its etcd
 * metadata driver for an etcd:// URI, on its built-in ZooKeeper driver for a zk:// one) driven from
 * the command line by the Go interop tests. Every result is one JSON object per line on stdout;
 * logs go to stderr.
 *
 * <p>Usage: {@code Driver <command> --uri etcd://HOST:PORT/SCOPE|zk://HOST:PORT/ROOT [--protocol v3|v2]
 * [--client-conf FILE] [options]}: {@code --client-conf} loads client configuration keys from a
 * properties file (the TLS keys, say) on top of the Driver's own settings.
 *
 * <ul>
 *   <li>{@code write [--digest CRC32C|CRC32|MAC|DUMMY[,...]] [--password P] [--ensemble 3] [--write-quorum 2]
 *       [--ack-quorum 2] [--entries N] [--seed S] [--close true|false] [--until-error] [--pause-ms 0]}:
 *       creates a ledger (prints {"created":ID}), appends entries 0..N-1 with the payloads of
 *       {@link #payload} (prints {"ack":ID} after each), optionally closes; with --until-error keeps
 *       appending until an append fails (N is then a cap). Ends with {"op":"write",...,"error":CODE}
 *       (0 when nothing failed). A list of digest types writes one ledger per type.
 *   <li>{@code writeadv [--ledger-id ID] [--digest D] [--password P] [--entries N] [--seed S]
 *       [--window W]}: creates a ledger with explicit entry ids (createLedgerAdv: makeAdv(), with
 *       withLedgerId(ID) unless ID is 0) and writes entries 0..N-1 with writeAsync, each window of
 *       W ids in reverse order (all of a window in flight at once, out of order), then closes. It
 *       also writes entry 0 again and creates the same ledger id again, and reports both error
 *       codes (Java's DuplicateEntryIdException -114, LedgerExistException -20). Prints
 *       {"created":ID}, then {"op":"writeadv",...}.
 *   <li>{@code read --ledger ID[,ID...] [--password P] [--recovery]}: opens (with recovery: fencing, as
 *       openLedger) and reads every entry up to the LAC; prints entries as hex.
 *   <li>{@code tail --ledger ID [--password P] [--from 0] [--count N] [--timeout-ms 30000]}: opens
 *       without recovery, prints {"ready":true}, then long-polls with readLastAddConfirmedAndEntry
 *       and prints {"entry":ID,"lac":L,"data":HEX} for each new entry until N were seen.
 *   <li>{@code meta --ledger ID[,ID...]}: Java's view of the ledger metadata.
 *   <li>{@code list}: every ledger id Java lists.
 *   <li>{@code delete --ledger ID}.
 *   <li>{@code markur --ledger ID --missing BOOKIE[,BOOKIE...]} (ZooKeeper only): marks the ledger
 *       under-replicated with those missing replicas through BookKeeper's own
 *       LedgerUnderreplicationManager (what Java's auditor calls), so that the record is Java's.
 * </ul>
 *
 * <p>The process exits 0 when the command's JSON was printed (errors are part of it, "error" is
 * the BookKeeper error code), 2 on a usage error.
 */
public final class Driver {
    static final String CLIENT_DRIVER = "org.apache.bookkeeper.metadata.etcd.EtcdMetadataClientDriver";
    static final String BOOKIE_DRIVER = "org.apache.bookkeeper.metadata.etcd.EtcdMetadataBookieDriver";

    private final Map<String, String> opts = new HashMap<>();
    private final List<String> flags = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage("no command");
        }
        Driver d = new Driver();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                usage("unexpected argument " + a);
            }
            String k = a.substring(2);
            if (k.equals("recovery") || k.equals("until-error")) {
                d.flags.add(k);
            } else if (i + 1 < args.length) {
                d.opts.put(k, args[++i]);
            } else {
                usage("missing value for " + a);
            }
        }
        registerDriversFor(d.opt("uri", null));
        int rc = d.run(args[0]);
        System.out.flush();
        // BookKeeper leaves non-daemon threads behind on some error paths.
        System.exit(rc);
    }

    /**
     * Registers the metadata drivers the URI needs. The ZooKeeper drivers (zk, zk+TYPE) are
     * BookKeeper's built-in default: nothing to do, and the etcd driver jar need not be on the
     * classpath. The etcd driver is not registered by default (spec/metadata.md §2.1): the system
     * properties name it, and loading the classes runs their static registration.
     */
    static void registerDriversFor(String uri) throws ClassNotFoundException {
        if (uri.startsWith("etcd:") || uri.startsWith("etcd+")) {
            registerEtcdDrivers();
        }
    }

    private static void registerEtcdDrivers() throws ClassNotFoundException {
        if (System.getProperty("bookkeeper.metadata.client.drivers") == null) {
            System.setProperty("bookkeeper.metadata.client.drivers", CLIENT_DRIVER);
        }
        if (System.getProperty("bookkeeper.metadata.bookie.drivers") == null) {
            System.setProperty("bookkeeper.metadata.bookie.drivers", BOOKIE_DRIVER);
        }
        Class.forName(CLIENT_DRIVER);
        Class.forName(BOOKIE_DRIVER);
    }

    private static void usage(String why) {
        System.err.println("usage: Driver write|writeadv|read|tail|meta|list|delete|markur --uri etcd://HOST:PORT/SCOPE|zk://HOST:PORT/ROOT ...: " + why);
        System.exit(2);
    }

    private String opt(String k, String def) {
        String v = opts.get(k);
        if (v == null) {
            if (def == null) {
                usage("missing --" + k);
            }
            return def;
        }
        return v;
    }

    private long num(String k, long def) {
        return Long.parseLong(opt(k, Long.toString(def)));
    }

    private int run(String cmd) throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(opt("uri", null));
        conf.setUseV2WireProtocol(opt("protocol", "v3").equals("v2"));
        conf.setAddEntryTimeout(10);
        conf.setReadEntryTimeout(10);
        // Every ledger in these tests has 3 bookies: keep rack awareness out of the way.
        conf.setEnforceMinNumRacksPerWriteQuorum(false);
        // --store-ctime true: Java's storeSystemTimeAsLedgerCreationTime (the ledger's
        // metadata records its creation time).
        conf.setStoreSystemtimeAsLedgerCreationTime(Boolean.parseBoolean(opt("store-ctime", "false")));
        String clientConf = opts.get("client-conf");
        if (clientConf != null) {
            conf.loadConf(new java.io.File(clientConf).toURI().toURL());
        }
        byte[] password = opt("password", "").getBytes(StandardCharsets.UTF_8);
        // Not closed: closing a BookKeeper client takes seconds (worker pool shutdown), and the
        // process exits right after the command anyway.
        BookKeeper bk = BookKeeper.newBuilder(conf).build();
        {
            switch (cmd) {
                case "write" -> {
                    // --digest A,B,...: one ledger per digest type, one after the other.
                    for (String dt : opt("digest", "CRC32C").split(",")) {
                        write(bk, password, dt);
                    }
                }
                case "writeadv" -> writeAdv(bk, password);
                case "read" -> {
                    // --ledger A,B,...: each in turn.
                    for (String id : opt("ledger", null).split(",")) {
                        read(bk, password, Long.parseLong(id));
                    }
                }
                case "tail" -> tail(bk, password);
                case "meta" -> {
                    for (String id : opt("ledger", null).split(",")) {
                        meta(bk, Long.parseLong(id));
                    }
                }
                case "list" -> list(bk);
                case "delete" -> delete(bk);
                case "markur" -> markUnderreplicated(bk);
                default -> usage("unknown command " + cmd);
            }
        }
        return 0;
    }

    /** The payload of entry i of a ledger written with seed s; the Go tests build the same bytes. */
    static byte[] payload(long seed, long i) {
        int len;
        if (i == 0) {
            len = 0;
        } else if (i % 50 == 7) {
            len = 256 * 1024 + (int) i;
        } else {
            len = (int) ((i * 131 + seed * 7) % 3000) + 1;
        }
        byte[] b = new byte[len];
        for (int j = 0; j < len; j++) {
            b[j] = (byte) ((seed * 31 + i * 17 + (long) j * 7) & 0xff);
        }
        return b;
    }

    /** The --custom option, key=value pairs separated by ';', values as UTF-8 bytes. */
    private Map<String, byte[]> customMetadata() {
        Map<String, byte[]> m = new java.util.HashMap<>();
        String spec = opt("custom", "");
        for (String kv : spec.isEmpty() ? new String[0] : spec.split(";")) {
            int eq = kv.indexOf('=');
            if (eq < 0) {
                usage("--custom wants key=value pairs separated by ';': " + kv);
            }
            m.put(kv.substring(0, eq), kv.substring(eq + 1).getBytes(StandardCharsets.UTF_8));
        }
        return m;
    }

    private void write(BookKeeper bk, byte[] password, String digest) throws Exception {
        long n = num("entries", 20);
        long seed = num("seed", 1);
        long pause = num("pause-ms", 0);
        boolean untilError = flags.contains("until-error");
        WriteHandle wh;
        try {
            wh = bk.newCreateLedgerOp()
                    .withEnsembleSize((int) num("ensemble", 3))
                    .withWriteQuorumSize((int) num("write-quorum", 2))
                    .withAckQuorumSize((int) num("ack-quorum", 2))
                    .withDigestType(DigestType.valueOf(digest))
                    .withPassword(password)
                    .withCustomMetadata(customMetadata())
                    .execute().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            printError("write", -1, e);
            return;
        }
        long id = wh.getId();
        emit(new Json().put("created", id));
        int error = 0;
        String message = "";
        long lastAck = -1;
        for (long i = 0; i < n; i++) {
            try {
                long eid = wh.append(payload(seed, i));
                lastAck = eid;
                emit(new Json().put("ack", eid));
            } catch (Exception e) {
                error = code(e);
                message = String.valueOf(e);
                break;
            }
            if (pause > 0) {
                Thread.sleep(pause);
            }
        }
        if (untilError && error == 0) {
            message = "no append failed";
        }
        boolean closed = false;
        if (error == 0 && Boolean.parseBoolean(opt("close", "true"))) {
            try {
                wh.close();
                closed = true;
            } catch (Exception e) {
                error = code(e);
                message = String.valueOf(e);
            }
        }
        emit(new Json().put("op", "write").put("ledgerId", id).put("lastAck", lastAck)
                .put("digest", digest).put("lac", wh.getLastAddConfirmed()).put("closed", closed)
                .put("error", error).put("message", message));
        // Unless closed above, the ledger is left as it is (no close, no metadata change) for a
        // recoverer: the process exits right after.
    }

    private WriteAdvHandle createAdv(BookKeeper bk, byte[] password, long ledgerId) throws Exception {
        CreateAdvBuilder b = bk.newCreateLedgerOp()
                .withEnsembleSize((int) num("ensemble", 3))
                .withWriteQuorumSize((int) num("write-quorum", 2))
                .withAckQuorumSize((int) num("ack-quorum", 2))
                .withDigestType(DigestType.valueOf(opt("digest", "CRC32C")))
                .withPassword(password)
                .makeAdv();
        if (ledgerId != 0) {
            b = b.withLedgerId(ledgerId);
        }
        return b.execute().get(30, TimeUnit.SECONDS);
    }

    private void writeAdv(BookKeeper bk, byte[] password) throws Exception {
        long n = num("entries", 20);
        long seed = num("seed", 1);
        long window = Math.max(1, num("window", 16));
        WriteAdvHandle wh;
        try {
            wh = createAdv(bk, password, num("ledger-id", 0));
        } catch (Exception e) {
            printError("writeadv", num("ledger-id", 0), e);
            return;
        }
        long id = wh.getId();
        emit(new Json().put("created", id));
        int error = 0;
        String message = "";
        try {
            for (long lo = 0; lo < n; lo += window) {
                List<CompletableFuture<Long>> fs = new ArrayList<>();
                for (long i = Math.min(n, lo + window) - 1; i >= lo; i--) {
                    fs.add(wh.writeAsync(i, payload(seed, i)));
                }
                for (CompletableFuture<Long> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
            }
        } catch (Exception e) {
            error = code(e);
            message = String.valueOf(e);
        }
        int duplicateError = 0;
        try {
            wh.write(0, new byte[] {1});
        } catch (Exception e) {
            duplicateError = code(e);
        }
        boolean closed = false;
        if (error == 0) {
            try {
                wh.close();
                closed = true;
            } catch (Exception e) {
                error = code(e);
                message = String.valueOf(e);
            }
        }
        int existsError = 0;
        try {
            createAdv(bk, password, id).close();
        } catch (Exception e) {
            existsError = code(e);
        }
        emit(new Json().put("op", "writeadv").put("ledgerId", id).put("lac", wh.getLastAddConfirmed())
                .put("closed", closed).put("duplicateError", duplicateError).put("existsError", existsError)
                .put("error", error).put("message", message));
    }

    private ReadHandle open(BookKeeper bk, byte[] password, long id, boolean recovery) throws Exception {
        return bk.newOpenLedgerOp()
                .withLedgerId(id)
                .withRecovery(recovery)
                .withPassword(password)
                .execute().get(60, TimeUnit.SECONDS);
    }

    private void read(BookKeeper bk, byte[] password, long id) throws Exception {
        boolean recovery = flags.contains("recovery");
        ReadHandle rh;
        try {
            rh = open(bk, password, id, recovery);
        } catch (Exception e) {
            printError("read", id, e);
            return;
        }
        long lac = rh.getLastAddConfirmed();
        if (!rh.isClosed()) {
            lac = rh.readLastAddConfirmed();
        }
        List<String> hex = new ArrayList<>();
        int error = 0;
        String message = "";
        try {
            for (long first = 0; first <= lac; first += 100) {
                try (LedgerEntries es = rh.read(first, Math.min(lac, first + 99))) {
                    for (LedgerEntry e : es) {
                        hex.add(HexFormat.of().formatHex(e.getEntryBytes()));
                    }
                }
            }
        } catch (Exception e) {
            error = code(e);
            message = String.valueOf(e);
        }
        LedgerMetadata md = rh.getLedgerMetadata();
        emit(new Json().put("op", "read").put("ledgerId", rh.getId()).put("lac", lac)
                .put("closed", rh.isClosed()).put("length", rh.getLength())
                .put("lastEntryId", md.getLastEntryId()).put("digest", md.getDigestType().name())
                .put("error", error).put("message", message).putStrings("entries", hex));
        rh.close();
    }

    private void tail(BookKeeper bk, byte[] password) throws Exception {
        long next = num("from", 0);
        long count = num("count", 10);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(num("timeout-ms", 30000));
        ReadHandle rh;
        try {
            rh = open(bk, password, num("ledger", -1), false);
        } catch (Exception e) {
            printError("tail", num("ledger", -1), e);
            return;
        }
        emit(new Json().put("ready", true).put("lac", rh.getLastAddConfirmed()));
        long seen = 0;
        long polls = 0;
        int error = 0;
        String message = "";
        long retries = 0;
        long lacReads = 0;
        long lastPollLac = -2;
        boolean v2 = opt("protocol", "v3").equals("v2");
        while (seen < count && System.nanoTime() < deadline) {
            polls++;
            long lac;
            try (LastConfirmedAndEntry r = rh.readLastAddConfirmedAndEntry(next, 1000, false)) {
                lastPollLac = r.getLastAddConfirmed();
                lac = Math.max(lastPollLac, rh.getLastAddConfirmed());
                if (r.hasEntry()) {
                    LedgerEntry e = r.getEntry();
                    emit(new Json().put("entry", e.getEntryId()).put("lac", lac)
                            .put("data", HexFormat.of().formatHex(e.getEntryBytes())));
                    next = e.getEntryId() + 1;
                    seen++;
                    continue;
                }
            } catch (Exception e) {
                int c = code(e);
                // v2 has no long poll: the Java client sends a plain READ of entry -1, which a
                // bookie that has no entry of the ledger yet answers with NoSuchLedger/NoSuchEntry
                // (Java bookies too). A v2 tailer polls again.
                if ((c == BKException.Code.NoSuchLedgerExistsOnMetadataServerException
                        || c == BKException.Code.NoSuchLedgerExistsException
                        || c == BKException.Code.NoSuchEntryException) && seen == 0) {
                    retries++;
                    Thread.sleep(50);
                    continue;
                }
                error = c;
                message = String.valueOf(e);
                break;
            }
            // The LAC passed next but the entry was not piggybacked (always so with v2, where the
            // answer carries the last entry, not entry next): read the entries up to the LAC, as
            // a tailing application does.
            if (lac >= next) {
                try (LedgerEntries es = rh.read(next, Math.min(lac, next + count - seen - 1))) {
                    for (LedgerEntry e : es) {
                        emit(new Json().put("entry", e.getEntryId()).put("lac", lac).put("read", true)
                                .put("data", HexFormat.of().formatHex(e.getEntryBytes())));
                        next = e.getEntryId() + 1;
                        seen++;
                    }
                } catch (Exception e) {
                    error = code(e);
                    message = String.valueOf(e);
                    break;
                }
            } else if (rh.isClosed()) {
                break;
            } else if (v2) {
                // Over v2, readLastAddConfirmedAndEntry never reports a LAC past the handle's
                // (seen against Folio bookies; see docs/compatibility.md): ask for the LAC as a v2
                // tailer must, and read up to it on the next turn.
                lacReads++;
                long l = rh.readLastAddConfirmed();
                if (l < next) {
                    Thread.sleep(20);
                }
            }
        }
        emit(new Json().put("op", "tail").put("ledgerId", rh.getId()).put("seen", seen).put("polls", polls)
                .put("retries", retries).put("lacReads", lacReads).put("lastPollLac", lastPollLac)
                .put("error", error).put("message", message));
        rh.close();
    }

    private void meta(BookKeeper bk, long id) throws Exception {
        LedgerMetadata md;
        try {
            md = bk.getLedgerMetadata(id).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            printError("meta", id, e);
            return;
        }
        StringBuilder ens = new StringBuilder("{");
        md.getAllEnsembles().forEach((first, bookies) -> {
            if (ens.length() > 1) {
                ens.append(',');
            }
            List<String> ids = new ArrayList<>();
            for (BookieId b : bookies) {
                ids.add(b.toString());
            }
            ens.append('"').append(first).append("\":").append(Json.strings(ids));
        });
        ens.append('}');
        Map<String, String> custom = new java.util.TreeMap<>();
        md.getCustomMetadata().forEach((k, v) -> custom.put(k, HexFormat.of().formatHex(v)));
        emit(new Json().put("op", "meta").put("ledgerId", md.getLedgerId())
                .put("ensembleSize", md.getEnsembleSize()).put("writeQuorum", md.getWriteQuorumSize())
                .put("ackQuorum", md.getAckQuorumSize()).put("state", md.getState().name())
                .put("lastEntryId", md.getLastEntryId()).put("length", md.getLength())
                .put("digest", md.getDigestType().name()).put("hasPassword", md.hasPassword())
                .put("password", HexFormat.of().formatHex(md.getPassword()))
                .put("formatVersion", md.getMetadataFormatVersion()).put("ctime", md.getCtime())
                .putRaw("ensembles", ens.toString()).putRaw("custom", Json.stringMap(custom))
                .put("error", 0));
    }

    private void list(BookKeeper bk) throws Exception {
        List<Long> ids = new ArrayList<>();
        try (var res = bk.newListLedgersOp().execute().get(30, TimeUnit.SECONDS)) {
            for (long id : res.toIterable()) {
                ids.add(id);
            }
        } catch (Exception e) {
            printError("list", -1, e);
            return;
        }
        emit(new Json().put("op", "list").putRaw("ledgers", ids.toString().replace(" ", "")).put("error", 0));
    }

    private void delete(BookKeeper bk) throws Exception {
        long id = num("ledger", -1);
        try {
            bk.newDeleteLedgerOp().withLedgerId(id).execute().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            printError("delete", id, e);
            return;
        }
        emit(new Json().put("op", "delete").put("ledgerId", id).put("error", 0));
    }

    private void markUnderreplicated(BookKeeper bk) throws Exception {
        long id = num("ledger", -1);
        List<String> missing = List.of(opt("missing", null).split(","));
        // The client API hides the metadata driver; the classic client behind it exposes its
        // ledger manager factory (as BookKeeper's own tests use it).
        var factory = ((org.apache.bookkeeper.client.BookKeeper) bk).getLedgerManagerFactory();
        try (var urm = factory.newLedgerUnderreplicationManager()) {
            urm.markLedgerUnderreplicatedAsync(id, missing).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            printError("markur", id, e);
            return;
        }
        emit(new Json().put("op", "markur").put("ledgerId", id).put("error", 0));
    }

    // ------------------------------------------------------------------ output

    private static int code(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof java.util.concurrent.CompletionException)
                && e.getCause() != null) {
            e = e.getCause();
        }
        if (e instanceof BKException bke) {
            return bke.getCode();
        }
        if (e instanceof org.apache.bookkeeper.client.BKException bke) {
            return bke.getCode();
        }
        return -999;
    }

    private static void printError(String op, long id, Exception e) {
        emit(new Json().put("op", op).put("ledgerId", id).put("error", code(e)).put("message", String.valueOf(e)));
    }

    private static synchronized void emit(Json j) {
        System.out.println(j);
        System.out.flush();
    }

    /** A tiny JSON object writer: the harness must not depend on a JSON library's version. */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");

        private Json key(String k) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append(quote(k)).append(':');
            return this;
        }

        Json put(String k, long v) {
            key(k).sb.append(v);
            return this;
        }

        Json put(String k, boolean v) {
            key(k).sb.append(v);
            return this;
        }

        Json put(String k, String v) {
            key(k).sb.append(quote(v));
            return this;
        }

        Json putRaw(String k, String json) {
            key(k).sb.append(json);
            return this;
        }

        Json putStrings(String k, List<String> v) {
            return putRaw(k, strings(v));
        }

        static String strings(List<String> v) {
            StringBuilder b = new StringBuilder("[");
            for (int i = 0; i < v.size(); i++) {
                b.append(i > 0 ? "," : "").append(quote(v.get(i)));
            }
            return b.append(']').toString();
        }

        static String stringMap(Map<String, String> m) {
            StringBuilder b = new StringBuilder("{");
            m.forEach((k, v) -> b.append(b.length() > 1 ? "," : "").append(quote(k)).append(':').append(quote(v)));
            return b.append('}').toString();
        }

        static String quote(String s) {
            StringBuilder b = new StringBuilder("\"");
            for (char c : s.toCharArray()) {
                switch (c) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                    }
                }
            }
            return b.append('"').toString();
        }

        @Override
        public String toString() {
            return sb + "}";
        }
    }
}
