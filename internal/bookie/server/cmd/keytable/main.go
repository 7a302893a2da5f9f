// Command keytable prints the bk_server.conf key table of
// internal/bookie/server as Markdown, or with -w FILE rewrites the table
// between its markers in FILE (docs/operations.md; `make docs`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/foliodb/folio/internal/bookie/server"
)

func main() {
	write := flag.String("w", "", "rewrite the key table in this Markdown file")
	flag.Parse()
	if *write == "" {
		fmt.Print(server.KeyTableMarkdown())
		return
	}
	b, err := os.ReadFile(*write)
	if err != nil {
		fmt.Fprintln(os.Stderr, "keytable:", err)
		os.Exit(1)
	}
	doc, err := server.ReplaceKeyTable(string(b))
	if err != nil {
		fmt.Fprintf(os.Stderr, "keytable: %s: %v\n", *write, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*write, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "keytable:", err)
		os.Exit(1)
	}
}
