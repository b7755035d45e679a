package ring

import "errors"

var (
	// ErrInvalidConfig is returned by New when a Config field is invalid; the
	// wrapping error names the field and its value.
	ErrInvalidConfig = errors.New("ring: invalid config")

	// ErrClosed is returned by Join and Leave when the Ring is closed.
	ErrClosed = errors.New("ring: closed")

	// ErrIncompatible is returned by Join when a seed's cluster has another
	// Fingerprint (another cluster name, partition count, replication factor or
	// placement version), so this node was refused. Retrying cannot help.
	ErrIncompatible = errors.New("ring: incompatible fingerprint")

	// errBadMeta is returned by decodeMeta when node metadata is not a ring
	// node's; such a node is refused and left out of tables.
	errBadMeta = errors.New("ring: malformed node metadata")
)
