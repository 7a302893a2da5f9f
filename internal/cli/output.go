package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// OutputFormat is the -o flag: how a command prints its result.
type OutputFormat string

const (
	OutputText OutputFormat = "text"
	OutputJSON OutputFormat = "json"
)

// Set implements pflag.Value, refusing unknown formats (a usage error).
func (f *OutputFormat) Set(s string) error {
	switch OutputFormat(s) {
	case OutputText, OutputJSON:
		*f = OutputFormat(s)
		return nil
	}
	return fmt.Errorf("unknown output format %q: use text or json", s)
}

func (f *OutputFormat) String() string { return string(*f) }
func (f *OutputFormat) Type() string   { return "format" }

// Printer writes a command's result in the chosen format. Commands build one
// value that is both their JSON document and the source of their text, so
// the two can never disagree.
type Printer struct {
	W      io.Writer
	Format OutputFormat
}

// Print writes v as JSON (-o json) or calls text to render it for humans.
// JSON output is indented and ends with a newline; int64 ids are printed as
// exact integers (encoding/json never goes through float64 when encoding).
func (p Printer) Print(v any, text func(w io.Writer) error) error {
	if p.Format == OutputJSON {
		enc := json.NewEncoder(p.W)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(p.W)
}

// Table renders rows under headers with aligned columns.
type Table struct {
	Headers []string
	Rows    [][]string
}

// Append adds a row; cells are formatted with fmt.Sprint.
func (t *Table) Append(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.Rows = append(t.Rows, row)
}

// WriteTo writes the table; an empty table prints its headers only.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tabwriter.NewWriter(cw, 0, 4, 2, ' ', 0)
	if len(t.Headers) > 0 {
		fmt.Fprintln(tw, strings.Join(t.Headers, "\t"))
	}
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	err := tw.Flush()
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
