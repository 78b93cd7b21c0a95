//go:build iceberg

package iceberg

// The SQLite driver of a `sqlite:` catalog: SQLite compiled to Go (no cgo).
import _ "github.com/ncruces/go-sqlite3/driver"
