package store

import "errors"

// Fencing refusals are not declared here: a stale epoch is reported with the
// *epoch.StaleError from package epoch, matched by errors.Is(err,
// epoch.ErrStale).
var (
	// ErrClosed is returned by every operation after Close, and by operations
	// that were still queued when Close was called.
	ErrClosed = errors.New("store: closed")

	// ErrLocked is returned by Open when another process or handle holds the
	// file's lock for longer than Config.OpenTimeout.
	ErrLocked = errors.New("store: data file locked by another process or handle")

	// ErrClusterMismatch is returned by SetClusterID when the file already
	// belongs to a different cluster, or to one with another partition
	// count.
	ErrClusterMismatch = errors.New("store: data directory belongs to another cluster")

	// ErrFailed is returned by every mutation after a transaction failed: the
	// store refuses further writes rather than risk applying a write that saw
	// lost state. The first failure's cause is wrapped with it.
	ErrFailed = errors.New("store: a transaction failed, the store refuses further writes")

	// ErrInvalid is returned by Open and by operations when an argument is
	// malformed: a negative partition, an empty key, an empty owner, an unknown
	// entry kind, a bad Config. The message names the offending value.
	ErrInvalid = errors.New("store: invalid argument")

	// ErrPosition is returned by Submit and Commit for a batch whose Prev is
	// not the partition's position (the replica missed or reordered a
	// batch), and by Export when the partition is not at the position
	// asked for.
	ErrPosition = errors.New("store: batch does not follow the partition's position")

	// ErrUntracked is returned by ExportLive and ExportChanges when their
	// tracker is gone or gave up (see Track): what changed since it
	// started is no longer known, and a copy must be made whole.
	ErrUntracked = errors.New("store: changes of the partition not tracked")

	// ErrCorrupt is returned by reads when a stored record cannot be decoded.
	ErrCorrupt = errors.New("store: corrupt record")
)
