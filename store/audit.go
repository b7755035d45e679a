package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	bolt "go.etcd.io/bbolt"
)

// AuditRecord is one epoch transition of a partition, as learned by this
// replica: a claim recorded by Choose.
type AuditRecord struct {
	// Epoch is the chosen claim's epoch.
	Epoch epoch.Epoch
	// Owner is the chosen claim's owner.
	Owner string
	// At is when this replica recorded it (its own clock).
	At time.Time
}

// Audit returns partition p's audit records, oldest first.
func (s *Store) Audit(p int) ([]AuditRecord, error) {
	if err := checkPartition(p); err != nil {
		return nil, err
	}
	var records []AuditRecord
	err := s.view(func(tx *bolt.Tx) error {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err
		}
		b := pt.sub(auditBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			r, err := decodeAudit(v)
			if err != nil {
				return fmt.Errorf("partition %d audit %x: %w", p, k, err)
			}
			records = append(records, r)
			return nil
		})
	})
	return records, err
}

// appendAudit appends r to the partition's audit, keyed by the bucket's
// sequence so that records keep their order. The partition's bucket must
// exist (saveMeta first).
func (pt *partition) appendAudit(r AuditRecord) error {
	b, err := pt.createSub(auditBucket)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(binary.BigEndian.AppendUint64(nil, seq), encodeAudit(r))
}

// encodeAudit encodes r as uvarint epoch, varint unix nanoseconds, owner.
func encodeAudit(r AuditRecord) []byte {
	buf := binary.AppendUvarint(nil, uint64(r.Epoch))
	buf = binary.AppendVarint(buf, r.At.UnixNano())
	return append(buf, r.Owner...)
}

// decodeAudit is the inverse of encodeAudit.
func decodeAudit(b []byte) (AuditRecord, error) {
	e, n := binary.Uvarint(b)
	if n <= 0 {
		return AuditRecord{}, fmt.Errorf("%w: audit epoch", ErrCorrupt)
	}
	b = b[n:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return AuditRecord{}, fmt.Errorf("%w: audit time", ErrCorrupt)
	}
	return AuditRecord{Epoch: epoch.Epoch(e), Owner: string(b[n:]), At: time.Unix(0, at)}, nil
}
