package tlsconf

import (
	"crypto/x509"
	"regexp"
	"strings"
)

// oidOU is the organizationalUnitName attribute type (2.5.4.11).
var oidOU = []int{2, 5, 4, 11}

// ouPart is one `code:value` part of an OU (BookKeeper's
// CertUtils.OU_GENERAL_NAME_REGEX, "^([0-9]+):(.*)$": Java's `.` does not
// match line terminators, and its `$` also matches before a final one).
var ouPart = regexp.MustCompile(`^([0-9]+):([^\n\r\x{85}\x{2028}\x{2029}]*)(?:\r\n|[\n\r\x{85}\x{2028}\x{2029}])?$`)

// Roles returns the roles a certificate carries, read as BookKeeper's
// CertUtils.getRolesFromOU does: the subject's first OU attribute is split
// at ';' into `code:value` parts, the value of code 0 (the last one if
// repeated) is split at ',' and each name trimmed. nil means the
// certificate carries no role (no OU, or no part with code 0). Java's
// String.split quirks are kept: trailing empty names are dropped, so "0:a,"
// is [a] and "0:,," has no role, while "0:" is one empty role.
func Roles(cert *x509.Certificate) []string {
	ou, ok := firstOU(cert)
	if !ok {
		return nil
	}
	var roleNames string
	found := false
	for _, part := range javaSplit(ou, ";") {
		m := ouPart.FindStringSubmatch(part)
		if m == nil {
			continue
		}
		if strings.TrimSpace(m[1]) == "0" {
			roleNames, found = strings.TrimSpace(m[2]), true
		}
	}
	if !found {
		return nil
	}
	parts := javaSplit(roleNames, ",")
	if len(parts) == 0 {
		return nil
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = strings.TrimSpace(p)
	}
	return out
}

// firstOU returns the value of the first OU attribute of the subject, in
// the order of its RDN sequence (Java's LdapName.getRdns order).
func firstOU(cert *x509.Certificate) (string, bool) {
	for _, atv := range cert.Subject.Names {
		if atv.Type.Equal(oidOU) {
			s, ok := atv.Value.(string)
			return s, ok
		}
	}
	return "", false
}

// javaSplit is Java's String.split(sep) for a literal one-character
// separator: trailing empty strings are removed, except that splitting ""
// gives [""].
func javaSplit(s, sep string) []string {
	if s == "" {
		return []string{""}
	}
	parts := strings.Split(s, sep)
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}
