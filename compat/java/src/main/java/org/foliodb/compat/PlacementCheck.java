package org.foliodb.compat;

import io.netty.util.HashedWheelTimer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.EnsemblePlacementPolicy;
import org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy;
import org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.feature.SettableFeatureProvider;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.net.DNSToSwitchMapping;
import org.apache.bookkeeper.stats.NullStatsLogger;

/**
 * Runs Apache BookKeeper's own placement policies (ZoneawareEnsemblePlacementPolicy,
 * RackawareEnsemblePlacementPolicy) on a topology given on stdin, so that Folio's
 * policies can be compared with them (compat/harness/placement.go).
 *
 * <p>Input, one command a line, words separated by spaces:
 * <pre>
 * policy zoneaware|rackaware
 * set KEY VALUE                     (a ClientConfiguration setting, before "init")
 * bookie HOST:PORT LOCATION         (the topology, before "init"; LOCATION "-": unresolvable)
 * init                              (builds the policy over the bookies, all writable)
 * check ID E QW QA B1 B2 ...        (prints "check ID FAIL|MEETS_SOFT|MEETS_STRICT")
 * new ID E QW QA                    (prints "new ID ok B1 B2 ..." | "new ID notenough" | "new ID illegal")
 * reset                             (forgets the policy, settings and bookies: the next topology)
 * </pre>
 * Bookie hosts must be distinct: the resolver maps host names to locations, as
 * Java's DNSToSwitchMapping does.
 */
public final class PlacementCheck {
  private PlacementCheck() {}

  /** Static host → location mapping; unknown hosts are unresolved (null). */
  static final class StaticMapping implements DNSToSwitchMapping {
    final Map<String, String> locations = new HashMap<>();

    @Override
    public List<String> resolve(List<String> names) {
      List<String> out = new ArrayList<>(names.size());
      for (String n : names) {
        out.add(locations.get(n));
      }
      return out;
    }

    @Override
    public void reloadCachedMappings() {}
  }

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    ClientConfiguration conf = new ClientConfiguration();
    StaticMapping mapping = new StaticMapping();
    Set<BookieId> bookies = new HashSet<>();
    String kind = null;
    EnsemblePlacementPolicy policy = null;
    HashedWheelTimer timer = new HashedWheelTimer();
    try {
      String line;
      while ((line = in.readLine()) != null) {
        line = line.trim();
        if (line.isEmpty()) {
          continue;
        }
        String[] f = line.split(" +");
        switch (f[0]) {
          case "policy":
            kind = f[1];
            break;
          case "set":
            conf.setProperty(f[1], f[2]);
            break;
          case "bookie": {
            BookieId id = BookieId.parse(f[1]);
            bookies.add(id);
            if (!f[2].equals("-")) {
              mapping.locations.put(f[1].substring(0, f[1].lastIndexOf(':')), f[2]);
            }
            break;
          }
          case "reset":
            if (policy != null) {
              policy.uninitalize();
            }
            policy = null;
            kind = null;
            conf = new ClientConfiguration();
            mapping = new StaticMapping();
            bookies = new HashSet<>();
            break;
          case "init":
            if ("zoneaware".equals(kind)) {
              policy = new ZoneawareEnsemblePlacementPolicy();
            } else if ("rackaware".equals(kind)) {
              policy = new RackawareEnsemblePlacementPolicy();
            } else {
              throw new IllegalArgumentException("unknown policy " + kind);
            }
            policy.initialize(conf, Optional.of(mapping), timer, SettableFeatureProvider.DISABLE_ALL,
                NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
            policy.onClusterChanged(bookies, new HashSet<>());
            break;
          case "check": {
            int e = Integer.parseInt(f[2]);
            List<BookieId> ens = new ArrayList<>();
            for (int i = 0; i < e; i++) {
              ens.add(BookieId.parse(f[5 + i]));
            }
            System.out.println("check " + f[1] + " " + policy.isEnsembleAdheringToPlacementPolicy(ens,
                Integer.parseInt(f[3]), Integer.parseInt(f[4])));
            break;
          }
          case "new": {
            StringBuilder sb = new StringBuilder("new ").append(f[1]);
            try {
              List<BookieId> ens = policy.newEnsemble(Integer.parseInt(f[2]), Integer.parseInt(f[3]),
                  Integer.parseInt(f[4]), null, new HashSet<>()).getResult();
              sb.append(" ok");
              for (BookieId b : ens) {
                sb.append(' ').append(b);
              }
            } catch (BKException.BKNotEnoughBookiesException ex) {
              sb.append(" notenough");
            } catch (IllegalArgumentException ex) {
              sb.append(" illegal");
            }
            System.out.println(sb);
            break;
          }
          default:
            throw new IllegalArgumentException("unknown command: " + line);
        }
      }
    } finally {
      if (policy != null) {
        policy.uninitalize();
      }
      timer.stop();
    }
    System.out.flush();
  }
}
