package autorecovery

import "github.com/foliodb/folio/internal/metadata/memory"

// The tests open memory:// URIs; the scheme is registered for tests only
// (docs/design/layout.md).
func init() { memory.Register() }
