package org.foliodb.compat;

import java.io.PrintStream;
import org.apache.bookkeeper.bookie.BookieShell;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.util.EntryFormatter;
import org.apache.bookkeeper.util.LedgerIdFormatter;

/**
 * Runs several Apache BookKeeper shell commands ({@code bin/bookkeeper shell ...}, the
 * {@link BookieShell} class) in one JVM, against the cluster at {@code --uri}: a JVM start per
 * command would cost seconds each.
 *
 * <p>Usage: {@code ShellBatch --uri etcd://HOST:PORT/SCOPE|zk://HOST:PORT/ROOT "listbookies -rw" "listledgers" ...}.
 * Each argument after the URI is one command line, split at spaces. Before a command the program
 * prints {@code ### command: <line>}, after it {@code ### rc: <exit code>}; what the command
 * prints (on stdout, or logged at INFO by its command class, which the caller's log4j
 * configuration sends to stdout) comes in between. The program exits 0 after running every
 * command, whatever their codes; the caller judges them.
 */
public final class ShellBatch {
    private ShellBatch() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || !args[0].equals("--uri")) {
            System.err.println("usage: ShellBatch --uri etcd://HOST:PORT/SCOPE|zk://HOST:PORT/ROOT COMMAND...");
            System.exit(2);
        }
        Driver.registerDriversFor(args[1]);
        PrintStream out = System.out;
        for (int i = 2; i < args.length; i++) {
            ServerConfiguration conf = new ServerConfiguration();
            conf.setMetadataServiceUri(args[1]);
            // The formatters are what BookieShell.main derives from the configuration.
            BookieShell shell = new BookieShell(LedgerIdFormatter.newLedgerIdFormatter(conf),
                    EntryFormatter.newEntryFormatter(conf));
            shell.setConf(conf);
            out.println("### command: " + args[i]);
            out.flush();
            int rc;
            try {
                rc = shell.run(args[i].trim().split("\\s+"));
            } catch (Exception e) {
                e.printStackTrace(out);
                rc = -1;
            }
            out.flush();
            out.println("### rc: " + rc);
            out.flush();
        }
        System.exit(0);
    }
}
