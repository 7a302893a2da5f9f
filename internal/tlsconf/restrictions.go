package tlsconf

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// Restrictions are the protocol versions and cipher suites a connection may
// use. The zero value leaves Go's defaults.
type Restrictions struct {
	// MinVersion and MaxVersion bound the protocol version (tls.VersionTLS*);
	// 0 is Go's default.
	MinVersion, MaxVersion uint16
	// CipherSuites are the TLS 1.0-1.2 suites; nil is Go's default. (Go's
	// TLS 1.3 suites are not configurable: see ParseRestrictions.)
	CipherSuites []uint16
}

func (r Restrictions) apply(c *tls.Config) {
	c.MinVersion, c.MaxVersion = r.MinVersion, r.MaxVersion
	if r.CipherSuites != nil {
		c.CipherSuites = slices.Clone(r.CipherSuites)
	}
}

// Java's (JSSE) protocol names.
var protocolVersions = map[string]uint16{
	"TLSv1":   tls.VersionTLS10,
	"TLSv1.1": tls.VersionTLS11,
	"TLSv1.2": tls.VersionTLS12,
	"TLSv1.3": tls.VersionTLS13,
}

// ParseRestrictions reads Java's tlsEnabledProtocols and
// tlsEnabledCipherSuites lists (JSSE standard names, which are the IANA
// names Go uses for suites; empty lists leave the defaults). protocolsKey
// and suitesKey name the two settings in errors.
//
// Go cannot express everything a JSSE engine can, so some lists are
// refused rather than widened (a connection must never be less restricted
// than configured):
//   - SSLv3 and SSLv2Hello, which Go does not speak, and protocol sets with
//     a gap (TLSv1 and TLSv1.2 without TLSv1.1): Go takes a range;
//   - a strict subset of the TLS 1.3 suites: Go always offers all three.
//
// As in Java, a suite list without TLS 1.3 suites rules TLS 1.3 out, and one
// with only TLS 1.3 suites rules out TLS 1.2 and lower.
func ParseRestrictions(protocols, suites []string, protocolsKey, suitesKey string) (Restrictions, error) {
	var r Restrictions
	minV, maxV := uint16(tls.VersionTLS12), uint16(tls.VersionTLS13) // Go's defaults
	if len(protocols) > 0 {
		var vs []uint16
		for _, p := range protocols {
			v, ok := protocolVersions[p]
			if !ok {
				if p == "SSLv3" || p == "SSLv2Hello" {
					return r, fmt.Errorf("%s: %s is not supported by Folio (TLSv1 to TLSv1.3 are)", protocolsKey, p)
				}
				return r, fmt.Errorf("%s: unknown protocol %q (want TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3)", protocolsKey, p)
			}
			if !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		if int(vs[len(vs)-1]-vs[0]) != len(vs)-1 {
			return r, fmt.Errorf("%s: %s leaves a gap between versions; Folio enables a contiguous range of versions only",
				protocolsKey, strings.Join(protocols, ","))
		}
		minV, maxV = vs[0], vs[len(vs)-1]
		r.MinVersion, r.MaxVersion = minV, maxV
	}
	if len(suites) == 0 {
		return r, nil
	}
	known := map[string]*tls.CipherSuite{}
	var all13 []uint16
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[cs.Name] = cs
		if is13(cs) {
			all13 = append(all13, cs.ID)
		}
	}
	var s12, s13 []uint16
	for _, name := range suites {
		if name == "TLS_EMPTY_RENEGOTIATION_INFO_SCSV" {
			continue // a JSSE signalling value, not a suite; Go always does secure renegotiation signalling
		}
		cs, ok := known[name]
		if !ok {
			return r, fmt.Errorf("%s: cipher suite %q is not one Folio knows (Go's names: IANA's, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", suitesKey, name)
		}
		switch {
		case is13(cs) && !slices.Contains(s13, cs.ID):
			s13 = append(s13, cs.ID)
		case !is13(cs) && !slices.Contains(s12, cs.ID):
			s12 = append(s12, cs.ID)
		}
	}
	if maxV >= tls.VersionTLS13 {
		switch {
		case len(s13) == 0:
			maxV = tls.VersionTLS12 // no TLS 1.3 suite: no TLS 1.3, as in Java
		case len(s13) < len(all13):
			return r, fmt.Errorf("%s lists only some of the TLS 1.3 suites, which Go cannot restrict; list all of %s, or none, or leave TLSv1.3 out of %s",
				suitesKey, strings.Join(suiteNames(all13), ","), protocolsKey)
		}
	}
	if minV <= tls.VersionTLS12 && len(s12) == 0 {
		minV = tls.VersionTLS13 // only TLS 1.3 suites
	}
	if minV > maxV {
		return r, fmt.Errorf("%s and %s leave no protocol version with an enabled suite", suitesKey, protocolsKey)
	}
	r.MinVersion, r.MaxVersion = minV, maxV
	if len(s12) > 0 {
		r.CipherSuites = s12
	}
	return r, nil
}

func is13(cs *tls.CipherSuite) bool {
	return len(cs.SupportedVersions) == 1 && cs.SupportedVersions[0] == tls.VersionTLS13
}

func suiteNames(ids []uint16) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = tls.CipherSuiteName(id)
	}
	return out
}
