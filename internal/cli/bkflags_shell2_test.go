package cli

import (
	"strconv"
	"strings"
	"testing"
)

// TestShell2BKFlagAnnotations checks the BookKeeper spellings the identity
// and cluster commands declare (contract: "folio/bk-flags", `-single=--gnu`
// or `-single=#N`): each names a flag the command has, and every one of
// BookKeeper's spellings of those commands is declared or is a shorthand.
func TestShell2BKFlagAnnotations(t *testing.T) {
	shell := newShellCommand(Env{Getenv: func(string) string { return "" }})
	// BookKeeper 4.17's spellings (BookieShell and the tools' commands).
	want := map[string][]string{
		"endpointinfo":            {"-bookieid", "-b"},
		"updatecookie":            {"-bookieId", "-b", "-expandstorage", "-e", "-list", "-l", "-delete", "-d", "-force", "-f"},
		"updateledgers":           {"-bookieId", "-b", "-updatespersec", "-s", "-maxOutstandingReads", "-r", "-limit", "-l", "-verbose", "-v", "-printprogress", "-p"},
		"updateBookieInLedger":    {"-sb", "-db", "-srcBookie", "-destBookie", "-updatespersec", "-s", "-maxOutstandingReads", "-r", "-limit", "-l", "-verbose", "-v", "-printprogress", "-p"},
		"listledgers":             {"-bookieid", "-id", "-meta", "-m"},
		"recover":                 {"-query", "-q", "-dryrun", "-dr", "-force", "-f", "-ledger", "-l", "-skipOpenLedgers", "-sk", "-deleteCookie", "-d", "-skipUnrecoverableLedgers", "-sku", "-replicationRate", "-rate"},
		"queryautorecoverystatus": {"-verbose", "-v"},
		"listunderreplicated":     {"-missingreplica", "-mr", "-excludingmissingreplica", "-emr", "-printmissingreplica", "-pmr", "-printreplicationworkerid", "-prw", "-onlydisplayledgercount", "-c"},
		"ledgermetadata":          {"-ledgerid", "-l", "-dumptofile", "-restorefromfile", "-update"},
	}
	for name, spellings := range want {
		cmd, _, err := shell.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("command %s: %v", name, err)
		}
		declared := map[string]string{}
		if a := cmd.Annotations[bkFlagsAnnotation]; a != "" {
			for _, pair := range strings.Split(a, ",") {
				single, target, ok := strings.Cut(pair, "=")
				if !ok || !strings.HasPrefix(single, "-") || strings.HasPrefix(single, "--") {
					t.Fatalf("%s: bad pair %q", name, pair)
				}
				switch {
				case strings.HasPrefix(target, "--"):
					if cmd.Flags().Lookup(target[2:]) == nil {
						t.Fatalf("%s: %s maps to %s, which the command lacks", name, single, target)
					}
				case strings.HasPrefix(target, "#"):
					if _, err := strconv.Atoi(target[1:]); err != nil {
						t.Fatalf("%s: bad positional %q", name, pair)
					}
				default:
					t.Fatalf("%s: bad target in %q", name, pair)
				}
				declared[single] = target
			}
		}
		for _, s := range spellings {
			if _, ok := declared[s]; ok {
				continue
			}
			if len(s) == 2 && cmd.Flags().ShorthandLookup(s[1:]) != nil {
				continue
			}
			t.Errorf("%s: BookKeeper's %s is neither declared nor a shorthand", name, s)
		}
	}
}
