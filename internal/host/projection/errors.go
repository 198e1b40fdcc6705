package projection

import (
	"errors"
	"fmt"
	"strings"
)

// ConfigParseError is returned when a configuration is not valid YAML (or
// JSON). Line is 1-based, 0 when unknown.
type ConfigParseError struct {
	Message string
	Line    int
}

func (e *ConfigParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("projection config: line %d: %s", e.Line, e.Message)
	}
	return "projection config: " + e.Message
}

// ConfigValidationError is returned when a configuration parses but is not
// valid. Issues lists every problem found, each prefixed with its line
// ("line 4: aggregations[0].function: ...") when it comes from a document.
type ConfigValidationError struct {
	Message string
	Issues  []string
	// Details are the issues in structured form, in the same order.
	Details []Issue
}

// Issue is one problem of a configuration: the path of the field
// ("aggregations[0].function"; empty for the document itself), its line
// in the source document (0 when unknown) and what is wrong.
type Issue struct {
	Line    int
	Path    string
	Message string
	// Missing is set when the issue is that Path is absent.
	Missing bool
}

func (e *ConfigValidationError) Error() string {
	return e.Message + ":\n  - " + strings.Join(e.Issues, "\n  - ")
}

// Errors of the engine. They are returned wrapped; test with errors.Is.
var (
	// ErrNoState: an operation that needs cached state got neither a
	// state nor a projection key.
	ErrNoState = errors.New("projection: no cached state or projection key")
	// ErrNotMaterialized: incremental processing or a materialized query
	// on a configuration with materialize: false.
	ErrNotMaterialized = errors.New("projection: configuration is not materialized")
	// ErrNoSource: compute or verify mode without a FactSource.
	ErrNoSource = errors.New("projection: compute mode needs a FactSource")
	// ErrConfigChanged: the cached state under the key was built by a
	// configuration that aggregates differently (fact types, window,
	// groupBy, aggregations or rollup). Use a new projection key (and
	// backfill) for the new configuration.
	ErrConfigChanged = errors.New("projection: cached state was built by a different configuration")
	// ErrRangeWithoutWindow: a time range on a materialized projection
	// without a time window, whose buckets carry no time.
	ErrRangeWithoutWindow = errors.New("projection: a time range needs a timeWindow (or compute mode)")
	// ErrMigration: a storage migration failed; the original data is
	// intact. The wrapped error says why.
	ErrMigration = errors.New("projection: storage migration failed")
	// ErrBusy: the projection stayed locked by a migration in another
	// process until the context ended.
	ErrBusy = errors.New("projection: cached state is being migrated")
	// ErrStateBehind: an incremental batch given ProcessOptions.AtLeast
	// found the cached state's factsThroughId below it: the state went
	// back (a Redis restored from an older snapshot) since the caller
	// last wrote it. Nothing of the batch was applied.
	ErrStateBehind = errors.New("projection: cached state is behind what was applied to it")
	// ErrInvalidFact: a fact could not be decoded.
	ErrInvalidFact = errors.New("projection: invalid fact")
	// ErrBadQuery: query options that do not fit the configuration.
	ErrBadQuery = errors.New("projection: invalid query")
)
