package ring

import (
	"encoding/binary"
	"fmt"
)

// PlacementVersion is the version of Place that this package implements. Bump
// it whenever Place can map the same members to a different table: nodes
// running different placements must not form one cluster.
const PlacementVersion = 1

// Fingerprint identifies what a cluster agrees on. Nodes whose fingerprints
// differ never see each other: memberlist refuses them on join and on gossip.
type Fingerprint struct {
	// Cluster is the cluster's name; it keeps two clusters on one network
	// apart.
	Cluster string
	// Partitions is the cluster's partition count P. Zero means
	// DefaultPartitions.
	Partitions int
	// RF is the replication factor: the size of each partition's replica set.
	// It must be at least 1; RF >= 3 survives the crash of a minority.
	RF int
	// PlacementVersion is the version of Place. Zero means this package's
	// PlacementVersion; any other value is refused by New.
	PlacementVersion int
	// Protocol is the version of what the nodes say to each other above
	// the ring (the caller's messages): nodes of builds that encode them
	// differently never see each other, instead of failing on every
	// message. The ring only compares it.
	Protocol int
	// Settings are the caller's settings every node must share (the
	// largest payload, say); the ring only compares them.
	Settings string
}

// String formats the fingerprint for logs.
func (f Fingerprint) String() string {
	return fmt.Sprintf("{cluster=%q P=%d RF=%d placement=v%d protocol=v%d settings=%q}", f.Cluster, f.Partitions, f.RF, f.PlacementVersion, f.Protocol, f.Settings)
}

// metaVersion is the first byte of the node metadata encoding. Version 1
// had no Protocol, version 2 no Settings, ClusterID and flags: they decode with
// zero values, so that a node of such a build is refused as one with
// another fingerprint, named in the log.
const metaVersion = 3

// nodeMeta is what a node carries in memberlist's node metadata.
type nodeMeta struct {
	RPCAddr     string
	Fingerprint Fingerprint
	// ClusterID is the ID of the cluster the node belongs to, "" while it
	// has none (see Config.ClusterID).
	ClusterID string
	// Founder is Config.Founder.
	Founder bool
	// Leaving is set by SetLeaving.
	Leaving bool
}

// Flags of nodeMeta's last byte.
const (
	founderFlag = 1 << iota
	leavingFlag
)

// encodeMeta encodes m as: version byte, then uvarint-length-prefixed RPCAddr
// and Cluster, then uvarints Partitions, RF, PlacementVersion and Protocol,
// then length-prefixed Settings and ClusterID, and a byte of flags
// (founderFlag, leavingFlag).
func encodeMeta(m nodeMeta) []byte {
	b := []byte{metaVersion}
	b = binary.AppendUvarint(b, uint64(len(m.RPCAddr)))
	b = append(b, m.RPCAddr...)
	b = binary.AppendUvarint(b, uint64(len(m.Fingerprint.Cluster)))
	b = append(b, m.Fingerprint.Cluster...)
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.Partitions))
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.RF))
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.PlacementVersion))
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.Protocol))
	b = binary.AppendUvarint(b, uint64(len(m.Fingerprint.Settings)))
	b = append(b, m.Fingerprint.Settings...)
	b = binary.AppendUvarint(b, uint64(len(m.ClusterID)))
	b = append(b, m.ClusterID...)
	var flags byte
	if m.Founder {
		flags |= founderFlag
	}
	if m.Leaving {
		flags |= leavingFlag
	}
	return append(b, flags)
}

// decodeMeta decodes what encodeMeta encoded, or versions 1 and 2 of it;
// it rejects anything else, including trailing bytes.
func decodeMeta(b []byte) (nodeMeta, error) {
	d := metaDecoder{b: b}
	if len(b) == 0 || b[0] < 1 || b[0] > metaVersion {
		return nodeMeta{}, errBadMeta
	}
	version := b[0]
	d.b = d.b[1:]
	var m nodeMeta
	m.RPCAddr = d.string()
	m.Fingerprint.Cluster = d.string()
	m.Fingerprint.Partitions = d.int()
	m.Fingerprint.RF = d.int()
	m.Fingerprint.PlacementVersion = d.int()
	if version > 1 {
		m.Fingerprint.Protocol = d.int()
	}
	if version > 2 {
		m.Fingerprint.Settings = d.string()
		m.ClusterID = d.string()
		flags := d.int()
		m.Founder, m.Leaving = flags&founderFlag != 0, flags&leavingFlag != 0
		if flags&^(founderFlag|leavingFlag) != 0 {
			d.err = errBadMeta
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nodeMeta{}, errBadMeta
	}
	return m, nil
}

// metaDecoder reads the fields of encodeMeta's encoding; after the first
// failure err is set and every read returns a zero value.
type metaDecoder struct {
	b   []byte
	err error
}

// uvarint reads one uvarint.
func (d *metaDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadMeta
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a uvarint that must fit an int32, which every count here does.
func (d *metaDecoder) int() int {
	v := d.uvarint()
	if v > maxMetaInt {
		d.err = errBadMeta
		return 0
	}
	return int(v)
}

// string reads a length-prefixed string.
func (d *metaDecoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errBadMeta
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
