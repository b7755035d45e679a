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
}

// String formats the fingerprint for logs.
func (f Fingerprint) String() string {
	return fmt.Sprintf("{cluster=%q P=%d RF=%d placement=v%d protocol=v%d}", f.Cluster, f.Partitions, f.RF, f.PlacementVersion, f.Protocol)
}

// metaVersion is the first byte of the node metadata encoding. Version 1
// had no Protocol: it decodes as Protocol 0, so that a node of such a build
// is refused as one with another fingerprint, named in the log.
const metaVersion = 2

// nodeMeta is what a node carries in memberlist's node metadata.
type nodeMeta struct {
	RPCAddr     string
	Fingerprint Fingerprint
}

// encodeMeta encodes m as: version byte, then uvarint-length-prefixed RPCAddr
// and Cluster, then uvarints Partitions, RF, PlacementVersion and Protocol.
func encodeMeta(m nodeMeta) []byte {
	b := []byte{metaVersion}
	b = binary.AppendUvarint(b, uint64(len(m.RPCAddr)))
	b = append(b, m.RPCAddr...)
	b = binary.AppendUvarint(b, uint64(len(m.Fingerprint.Cluster)))
	b = append(b, m.Fingerprint.Cluster...)
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.Partitions))
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.RF))
	b = binary.AppendUvarint(b, uint64(m.Fingerprint.PlacementVersion))
	return binary.AppendUvarint(b, uint64(m.Fingerprint.Protocol))
}

// decodeMeta decodes what encodeMeta encoded, or version 1 of it; it
// rejects anything else, including trailing bytes.
func decodeMeta(b []byte) (nodeMeta, error) {
	d := metaDecoder{b: b}
	if len(b) == 0 || b[0] != metaVersion && b[0] != 1 {
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
	if v > 1<<31-1 {
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
