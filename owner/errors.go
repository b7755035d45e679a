package owner

import (
	"errors"
	"fmt"

	"github.com/singlewriter/singlewriter/store"
)

var (
	// ErrNotOwner is returned (in a *NotOwnerError) by Lease when this node
	// does not serve the partition.
	ErrNotOwner = errors.New("owner: not the owner")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("owner: closed")
	// ErrForeignCluster is returned by Claims.MergeEncoded when the state
	// comes from a node of another cluster ID.
	ErrForeignCluster = errors.New("owner: claims from another cluster")
	// ErrNoCluster is returned by Claims.MergeEncoded when the state comes
	// from a node that has not joined a cluster yet.
	ErrNoCluster = errors.New("owner: claims from a node without a cluster")
	// ErrLeaving is returned by HandleHandoff on a node that is leaving
	// too; a Transport must return an error matching it for that refusal,
	// so that Leave hands the partition to another node.
	ErrLeaving = errors.New("owner: the node is leaving too")
	// ErrRevoked is the cause with which a Lease's Context ends: the
	// partition moved on while the lease was held.
	ErrRevoked = errors.New("owner: lease revoked: the partition moved to a new claim while the call ran")
)

// NotOwnerError says a node does not serve a partition and names the newest
// claim it knows, so the caller can go there.
type NotOwnerError struct {
	// P is the partition.
	P int
	// Claim is the newest claim known; Claim.Owner is "" if none is known.
	Claim store.Claim
}

// Error implements error.
func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("owner: partition %d is not served here (newest claim: epoch %d, owner %q)", e.P, e.Claim.Epoch, e.Claim.Owner)
}

// Is makes errors.Is(err, ErrNotOwner) true.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }
