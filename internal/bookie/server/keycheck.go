package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Environment variable prefixes of the container conventions.
const (
	// EnvPrefixBK is the Apache BookKeeper image's: BK_<key> (the key as
	// written in bk_server.conf) sets <key>. The image applies only keys
	// of its bk_server.conf (where most appear, commented), so that its
	// own variables (BK_DATA_DIR, BK_USER, ...) are not taken for keys;
	// Folio likewise applies BK_<key> only for a key of its key table or
	// of the file.
	EnvPrefixBK = "BK_"
	// EnvPrefixPulsar is Pulsar's: PULSAR_PREFIX_<key> sets <key>, added
	// when the file lacks it (apply-config-from-env.py); the value is
	// trimmed as Pulsar's script strips it.
	EnvPrefixPulsar = "PULSAR_PREFIX_"
)

// knownKeyNames returns every key the configuration knows: the key table
// and the implemented keys.
func knownKeyNames() []string {
	seen := map[string]bool{}
	for _, k := range bkKeys {
		seen[k.Name] = true
	}
	for _, k := range configKeys {
		seen[k.name] = true
	}
	for _, k := range storageKeys {
		seen[k.name] = true
	}
	for _, k := range propsKeys {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// implementedKey reports whether Folio acts on key (a setter in
// configKeys, or a key read from Props where it is used).
func implementedKey(key string) bool {
	if _, ok := findKey(key); ok {
		return true
	}
	for _, k := range storageKeys {
		if k.name == key {
			return true
		}
	}
	return slices.Contains(propsKeys, key)
}

// applyEnv applies the environment in increasing precedence: BK_<key>,
// PULSAR_PREFIX_<key>, FOLIO_<KEY> (EnvName). Empty values are skipped, as
// for an unset variable: the images' scripts export empty variables for
// settings they leave alone.
func (c *Config) applyEnv(ov Overrides, fileKeys []string) error {
	if ov.Getenv == nil && ov.Environ == nil {
		return nil
	}
	known := knownKeyNames()
	candidates := slices.Clone(known)
	for _, k := range fileKeys {
		if !slices.Contains(candidates, k) {
			candidates = append(candidates, k)
		}
	}
	slices.Sort(candidates)

	var env map[string]string
	if ov.Environ != nil {
		env = map[string]string{}
		for _, kv := range ov.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	lookup := func(name string) string {
		if env != nil {
			return env[name]
		}
		return ov.Getenv(name)
	}
	apply := func(key, value, source string) error {
		if value == "" {
			return nil
		}
		if err := c.SetFrom(key, value, source); err != nil {
			return fmt.Errorf("environment: %w", err)
		}
		return nil
	}

	for _, k := range candidates {
		if err := apply(k, lookup(EnvPrefixBK+k), EnvPrefixBK+k); err != nil {
			return err
		}
	}
	pulsarKeys := candidates
	if env != nil {
		pulsarKeys = nil
		for name := range env {
			if k, ok := strings.CutPrefix(name, EnvPrefixPulsar); ok && k != "" {
				pulsarKeys = append(pulsarKeys, k)
			}
		}
		slices.Sort(pulsarKeys)
	}
	for _, k := range pulsarKeys {
		if err := apply(k, strings.TrimSpace(lookup(EnvPrefixPulsar+k)), EnvPrefixPulsar+k); err != nil {
			return err
		}
	}
	for _, k := range known {
		if err := apply(k, lookup(EnvName(k)), EnvName(k)); err != nil {
			return err
		}
	}
	return nil
}

// CheckKeys classifies every property of c against the key table:
//   - a key Folio implements was checked when set;
//   - a not-supported key whose value changes what the operator gets
//     (KeyInfo.RefuseWhen) is an error naming the key, its value and
//     where it was set; one whose value is harmless but not honoured
//     (WarnWhen) is a warning;
//   - the irrelevant keys present are listed in one INFO line;
//   - an unknown key (a typo, or a key of another BookKeeper version) is
//     a warning naming the nearest known key; it is never an error, so
//     that a Java bookie's configuration loads.
//
// log may be nil (no messages; refusals are still returned).
func (c *Config) CheckKeys(log *slog.Logger) error {
	var irrelevant []string
	var refusals []error
	for _, k := range slices.Sorted(maps.Keys(c.Props)) {
		if implementedKey(k) {
			continue
		}
		v := c.Props[k]
		src := c.Sources[k]
		info, ok := keyIndex[k]
		if !ok {
			if log != nil {
				near := NearestKey(k)
				log.Warn(fmt.Sprintf("unknown configuration key %s (did you mean %s?); ignored", k, near),
					"key", k, "source", src, "nearest", near)
			}
			continue
		}
		switch info.Class {
		case Irrelevant:
			irrelevant = append(irrelevant, k)
		case NotSupported:
			switch {
			case info.RefuseWhen != nil && info.RefuseWhen.Holds(v):
				refusals = append(refusals, fmt.Errorf("%s: %s=%s is not supported by Folio (refused when %s): %s; remove it",
					sourceOrUnknown(src), k, displayValue(k, v), info.RefuseWhen.Text, info.Reason))
			case info.WarnWhen != nil && info.WarnWhen.Holds(v) && log != nil:
				log.Warn(fmt.Sprintf("configuration key %s=%s is not supported by Folio; accepted without effect: %s", k, displayValue(k, v), info.Reason),
					"key", k, "source", src)
			}
		case Implemented:
			// In the table as implemented but without a setter: the
			// consistency test rules this out.
		}
	}
	if len(irrelevant) > 0 && log != nil {
		log.Info("BookKeeper configuration keys with no meaning for Folio; ignored (see docs/operations.md, bk_server.conf keys)",
			"keys", strings.Join(irrelevant, ","))
	}
	if len(refusals) > 0 {
		return fmt.Errorf("configuration refused: %w", errors.Join(refusals...))
	}
	return nil
}

func sourceOrUnknown(src string) string {
	if src == "" {
		return "configuration"
	}
	return src
}

// displayValue is v, or "(set)" for a secret key's non-empty value.
func displayValue(key, v string) string {
	if v != "" && isSecret(key) {
		return "(set)"
	}
	return v
}

// EffectiveKey is one key of the effective configuration.
type EffectiveKey struct {
	Name string
	// Value is the value in effect ("(set)" for a set secret).
	Value string
	// Source is where it was set (Config.Sources), "default", or how it
	// was derived.
	Source string
	// Class is the key's class, "unknown" for a key not in the table.
	Class KeyClass
}

// Effective lists every key of the key table and every other key set,
// sorted by name, with its effective value and its source.
func (c *Config) Effective() []EffectiveKey {
	names := map[string]bool{}
	for _, k := range knownKeyNames() {
		names[k] = true
	}
	for k := range c.Props {
		names[k] = true
	}
	var out []EffectiveKey
	for _, k := range slices.Sorted(maps.Keys(names)) {
		e := EffectiveKey{Name: k, Class: "unknown"}
		info, inTable := keyIndex[k]
		if inTable {
			e.Class = info.Class
		}
		if implementedKey(k) && !(inTable && info.Class == NotSupported) {
			// Implemented (the SASL keys' setters refuse them).
			e.Class = Implemented
		}
		if v, set := c.Props[k]; set {
			e.Value, e.Source = v, c.Sources[k]
			if e.Source == "" {
				e.Source = "set"
			}
		} else {
			e.Source = "default"
			if inTable {
				e.Value = info.Default
			}
		}
		switch {
		case k == "metadataServiceUri" && e.Source == "default" && c.MetadataServiceURI != DefaultMetadataURI,
			k == "metadataServiceUri" && strings.TrimSpace(e.Value) == "" && c.MetadataServiceURI != "":
			e.Value, e.Source = c.MetadataServiceURI, "derived from zkServers, zkLedgersRootPath"
		case k == "diskUsageLwmThreshold" && e.Source == "default":
			e.Value, e.Source = fmt.Sprint(c.DiskUsageLwmThreshold), "default (diskUsageThreshold)"
		}
		e.Value = displayValue(k, e.Value)
		out = append(out, e)
	}
	return out
}

// WriteEffective prints Effective as a table: key, value, source, class.
func (c *Config) WriteEffective(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tCLASS")
	for _, e := range c.Effective() {
		v := e.Value
		if v == "" {
			v = "(empty)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, v, e.Source, e.Class)
	}
	return tw.Flush()
}
