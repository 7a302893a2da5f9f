package ledger

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// runWriteAt is the write-at command: WriteAt of each id of ids, in the
// order given, with payload "<writer>:<id>"; each id's outcome is printed,
// then the effects.
func (e *env) runWriteAt(t *testing.T, d *datadriven.TestData, name string) {
	w := e.machines[name].(*Writer)
	for _, v := range argVals(d, "ids") {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("write-at: id %q: %v", v, err)
		}
		if err := w.WriteAt(id, []byte(fmt.Sprintf("%s:%d", name, id))); err != nil {
			e.printf("write-at e%d: %v\n", id, err)
			continue
		}
		e.printf("write-at e%d\n", id)
	}
	e.drain(name)
}
