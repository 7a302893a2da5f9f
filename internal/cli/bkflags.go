package cli

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// BookKeeper's shell spells its flags the Apache Commons CLI way: one dash
// and a short or long name (`listbookies -rw`, `ledgermetadata -ledgerid 5`,
// `bookieformat -nonInteractive -force -deleteCookie`); its parser also takes
// the same names after two dashes. Cobra would read `-rw` as the shorthands
// -r -w. So that runbooks and charts work unchanged, `folio shell` rewrites
// those spellings into Folio's GNU flags before cobra parses anything.
//
// A command declares its spellings in its annotations under BKFlagsAnnotation:
// a comma-separated list of `-single=--gnu` pairs, or `-single=#N` for a
// BookKeeper flag whose value is Folio's N-th positional argument (0-based).
// The names are case-sensitive, as in BookKeeper (commands differ:
// listledgers -bookieid, updateledgers -bookieId); a command that took
// several spellings in BookKeeper's tools declares each of them.
const BKFlagsAnnotation = "folio/bk-flags"

// bkMapping is one declared spelling's meaning.
type bkMapping struct {
	// gnu is the Folio flag's name without dashes, or "" for a positional.
	gnu string
	// pos is the positional index when gnu is "".
	pos int
}

// bkFlags parses cmd's annotation. A malformed annotation is a programming
// error, caught by TestBKFlagsEveryCommand; here it panics with the command
// named, so that it cannot ship silently.
func bkFlags(cmd *cobra.Command) map[string]bkMapping {
	spec := cmd.Annotations[BKFlagsAnnotation]
	if spec == "" {
		return nil
	}
	m := make(map[string]bkMapping)
	for _, pair := range strings.Split(spec, ",") {
		pair = strings.TrimSpace(pair)
		single, target, ok := strings.Cut(pair, "=")
		if !ok || len(single) < 2 || single[0] != '-' || single[1] == '-' {
			panic(fmt.Sprintf("%s: bad %s entry %q: want -single=--gnu or -single=#N", cmd.CommandPath(), BKFlagsAnnotation, pair))
		}
		switch {
		case strings.HasPrefix(target, "--") && len(target) > 2:
			m[single] = bkMapping{gnu: target[2:]}
		case strings.HasPrefix(target, "#"):
			n, err := strconv.Atoi(target[1:])
			if err != nil || n < 0 {
				panic(fmt.Sprintf("%s: bad %s entry %q: #N needs a positional index", cmd.CommandPath(), BKFlagsAnnotation, pair))
			}
			m[single] = bkMapping{pos: n}
		default:
			panic(fmt.Sprintf("%s: bad %s entry %q: want -single=--gnu or -single=#N", cmd.CommandPath(), BKFlagsAnnotation, pair))
		}
	}
	return m
}

// bkSpellings lists cmd's declared spellings, sorted, for messages and help.
func bkSpellings(m map[string]bkMapping) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// bkCommandNames are BookKeeper command names that are spelled differently
// in Folio: the BookKeeper name is replaced by Folio's command path.
var bkCommandNames = map[string][]string{
	"cookie_get":                        {"cookie", "get"},
	"cookie_delete":                     {"cookie", "delete"},
	"cookie_update":                     {"cookie", "update"},
	"rebuild-db-ledger-locations-index": {"rebuild-index"},
}

// rewriteBKArgs rewrites the arguments of a `folio shell` command line
// (args without the program name) into the GNU spellings cobra parses. Other
// command lines are returned unchanged. For the target command it:
//   - replaces each declared spelling (-x, or --x when --x is not itself a
//     flag of the command, as BookKeeper's parser accepts both) by its GNU
//     flag, joining a value as --gnu=value so that a value starting with a
//     dash (-fe -1) stays a value;
//   - turns a declared positional spelling's value into that positional;
//   - keeps GNU flags, shorthands such as -o json, and their values as they
//     are, and refuses a single-dash word that is neither declared nor a
//     valid cluster of the command's shorthands, naming the spellings the
//     command does accept (cobra would say "unknown shorthand flag 'r' in
//     -rw", which helps nobody);
//   - accepts BookKeeper's -help, and its global `-conf FILE` before the
//     command name, for commands that read a bookie configuration.
//
// Flags are emitted in their order, followed by the positionals in theirs.
func rewriteBKArgs(root *cobra.Command, args []string) ([]string, error) {
	shellAt := -1
	for i, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			if a == "shell" {
				shellAt = i
			}
			break
		}
	}
	if shellAt < 0 {
		return args, nil
	}
	shell, _, err := root.Find([]string{"shell"})
	if err != nil || shell == nil || shell.Name() != "shell" {
		return args, nil
	}
	// Walk down the command path, collecting the tokens in between.
	cur := shell
	out := slices.Clone(args[:shellAt+1])
	var pre []string  // flag tokens seen before the target's name
	var conf []string // a BookKeeper global -conf FILE
	i := shellAt + 1
	for i < len(args) {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if (a == "-conf" || a == "--conf") && cur == shell && i+1 < len(args) {
				conf = []string{"--conf", args[i+1]}
				i += 2
				continue
			}
			pre = append(pre, a)
			if takesValue(cur, a) && i+1 < len(args) {
				pre = append(pre, args[i+1])
				i++
			}
			i++
			continue
		}
		name := a
		if cur == shell {
			if path, ok := bkCommandNames[a]; ok {
				sub, rest, err := shell.Find(path)
				if err == nil && len(rest) == 0 && sub != shell {
					out = append(out, path...)
					cur = sub
					i++
					continue
				}
			}
		}
		next := subcommand(cur, name)
		if next == nil {
			break
		}
		out = append(out, a)
		cur = next
		i++
	}
	if cur == shell {
		return args, nil // no command: cobra reports it
	}
	m := bkFlags(cur)
	fs := cur.Flags()
	var flags []string
	var pos []string
	mapped := map[int]string{}
	dash := false
	tokens := append(pre, args[i:]...)
	if conf != nil {
		if fs.Lookup("conf") == nil {
			return nil, Usagef(cur, "%s takes no -conf (it does not read a bookie configuration)", cur.CommandPath())
		}
		flags = append(flags, conf...)
	}
	for j := 0; j < len(tokens); j++ {
		t := tokens[j]
		if dash {
			pos = append(pos, t)
			continue
		}
		if t == "--" {
			dash = true
			continue
		}
		if !strings.HasPrefix(t, "-") || t == "-" {
			pos = append(pos, t)
			continue
		}
		name, val, hasVal := strings.Cut(t, "=")
		mp, declared := m[name]
		if !declared && strings.HasPrefix(name, "--") && lookupFlag(cur, name) == nil {
			mp, declared = m[name[1:]]
		}
		if declared {
			if mp.gnu == "" {
				if !hasVal {
					if j+1 >= len(tokens) {
						return nil, Usagef(cur, "flag %s needs a value", name)
					}
					j++
					val = tokens[j]
				}
				if prev, dup := mapped[mp.pos]; dup && prev != val {
					return nil, Usagef(cur, "flag %s given twice (%s and %s)", name, prev, val)
				}
				mapped[mp.pos] = val
				continue
			}
			f := fs.Lookup(mp.gnu)
			if f == nil {
				return nil, fmt.Errorf("%s: %s maps %s to --%s, which the command does not have", cur.CommandPath(), BKFlagsAnnotation, name, mp.gnu)
			}
			switch {
			case hasVal:
				flags = append(flags, "--"+mp.gnu+"="+val)
			case f.NoOptDefVal != "":
				flags = append(flags, "--"+mp.gnu)
			case j+1 < len(tokens):
				j++
				flags = append(flags, "--"+mp.gnu+"="+tokens[j])
			default:
				return nil, Usagef(cur, "flag %s needs a value", name)
			}
			continue
		}
		if name == "-help" {
			flags = append(flags, "--help")
			continue
		}
		if !strings.HasPrefix(t, "--") && len(name) > 2 && !shorthandCluster(cur, name[1:]) {
			msg := fmt.Sprintf("unknown flag %s for %q", name, cur.CommandPath())
			if len(m) > 0 {
				return nil, &UsageError{Err: fmt.Errorf("%s; BookKeeper spellings it accepts: %s (or see --help)", msg, strings.Join(bkSpellings(m), " ")), CommandPath: cur.CommandPath()}
			}
			return nil, &UsageError{Err: fmt.Errorf("%s; it accepts no BookKeeper single-dash spellings (see --help for its flags)", msg), CommandPath: cur.CommandPath()}
		}
		flags = append(flags, t)
		if !hasVal && takesValue(cur, t) && j+1 < len(tokens) {
			j++
			flags = append(flags, tokens[j])
		}
	}
	if len(mapped) > 0 {
		idx := make([]int, 0, len(mapped))
		for n := range mapped {
			idx = append(idx, n)
		}
		sort.Ints(idx)
		for _, n := range idx {
			at := min(n, len(pos))
			pos = slices.Insert(pos, at, mapped[n])
		}
	}
	out = append(out, flags...)
	needDash := dash
	for _, p := range pos {
		if strings.HasPrefix(p, "-") && p != "-" {
			needDash = true
		}
	}
	if needDash {
		out = append(out, "--")
	}
	return append(out, pos...), nil
}

// subcommand returns cur's subcommand called name (or aliased so), or nil.
func subcommand(cur *cobra.Command, name string) *cobra.Command {
	for _, c := range cur.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// lookupFlag finds the flag a GNU token (--name or -x) names among cmd's
// own and inherited flags.
func lookupFlag(cmd *cobra.Command, tok string) *pflag.Flag {
	name, _, _ := strings.Cut(tok, "=")
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags(), cmd.PersistentFlags()} {
		switch {
		case strings.HasPrefix(name, "--"):
			if f := fs.Lookup(name[2:]); f != nil {
				return f
			}
		case len(name) == 2:
			if f := fs.ShorthandLookup(name[1:]); f != nil {
				return f
			}
		}
	}
	return nil
}

// takesValue says whether tok (a GNU flag without =value) consumes the next
// argument as its value.
func takesValue(cmd *cobra.Command, tok string) bool {
	if strings.Contains(tok, "=") {
		return false
	}
	f := lookupFlag(cmd, tok)
	return f != nil && f.NoOptDefVal == ""
}

// shorthandCluster says whether s (after one dash) is what pflag accepts:
// boolean shorthands run together, optionally ending with one that takes
// the rest of the word as its value (-ojson, -n5).
func shorthandCluster(cmd *cobra.Command, s string) bool {
	for k := 0; k < len(s); k++ {
		f := lookupFlag(cmd, "-"+s[k:k+1])
		if f == nil {
			return false
		}
		if f.NoOptDefVal == "" {
			return true // the rest is its value
		}
	}
	return true
}

// describeBKFlags appends the declared BookKeeper spellings to the help
// text of every command of the tree that has some.
func describeBKFlags(cmd *cobra.Command) {
	if m := bkFlags(cmd); len(m) > 0 {
		var parts []string
		for _, k := range bkSpellings(m) {
			mp := m[k]
			if mp.gnu != "" {
				parts = append(parts, k+" (--"+mp.gnu+")")
			} else {
				parts = append(parts, fmt.Sprintf("%s (argument %d)", k, mp.pos+1))
			}
		}
		cmd.Long = strings.TrimRight(cmd.Long, "\n") + "\nBookKeeper spellings: " + strings.Join(parts, ", ") + "."
	}
	for _, c := range cmd.Commands() {
		describeBKFlags(c)
	}
}
