package server

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Property is one key=value pair of a .properties file, with the line it
// started on (for messages).
type Property struct {
	Key, Value string
	Line       int
}

// ParseProperties reads Java .properties syntax (java.util.Properties.load),
// the format of BookKeeper's bk_server.conf:
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//     blank lines are skipped;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - the key ends at the first unescaped '=', ':' or blank; blanks around
//     the separator are skipped, and one '=' or ':' after blanks is part of
//     the separator (so `key value`, `key=value`, `key : value` all work);
//   - escapes: \t \n \r \f, \uXXXX, and a backslash before any other
//     character stands for that character (\=, \:, \#, \\, \ ).
//
// The input is read as UTF-8 (Java's Reader form); ISO-8859-1 files whose
// values are ASCII, which is every real bk_server.conf, read the same. Keys
// appear in file order; a repeated key appears twice (the caller decides).
func ParseProperties(r io.Reader) ([]Property, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []Property
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		start := lineNo
		// Join continuation lines.
		for continues(line) {
			line = line[:len(line)-1]
			if !sc.Scan() {
				break
			}
			lineNo++
			line += strings.TrimLeft(sc.Text(), " \t\f")
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		out = append(out, Property{Key: key, Value: value, Line: start})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitProperty(line string) (key, value string, err error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	rawKey := line[:i]
	rest := line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescapeProperty(rawKey); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(rest); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a trailing lone backslash (end of file inside a continuation)
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
