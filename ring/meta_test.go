package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []nodeMeta{
		{RPCAddr: "127.0.0.1:9000", Fingerprint: Fingerprint{Cluster: "orders", Partitions: 271, RF: 3, PlacementVersion: 1, Protocol: 2}},
		{RPCAddr: "127.0.0.1:9000", Fingerprint: Fingerprint{Cluster: "orders", Partitions: 271, RF: 3, PlacementVersion: 1, Protocol: 2, Settings: "max=1"},
			ClusterID: "5f0c", Founder: true},
		{RPCAddr: "127.0.0.1:9000", Fingerprint: Fingerprint{Cluster: "orders", Partitions: 271, RF: 3, PlacementVersion: 1, Protocol: 2},
			ClusterID: "5f0c", Leaving: true},
	} {
		got, err := decodeMeta(encodeMeta(m))
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

func TestMetaDecodeRejectsForeignBytes(t *testing.T) {
	good := encodeMeta(nodeMeta{RPCAddr: "a:1", Fingerprint: Fingerprint{Cluster: "c", Partitions: 7, RF: 1, PlacementVersion: 1}})
	for name, b := range map[string][]byte{
		"empty":        nil,
		"json":         []byte(`{"rpc":"a:1"}`),
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"long string":  {metaVersion, 200, 'a'},
		"huge count":   append([]byte{metaVersion, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1),
		"bad varint":   {metaVersion, 0x80},
		"next version": append([]byte{metaVersion + 1}, good[1:]...),
		"unknown flag": append(append([]byte(nil), good[:len(good)-1]...), 4),
	} {
		_, err := decodeMeta(b)
		assert.ErrorIs(t, err, errBadMeta, name)
	}
}

// A node of a build before Protocol (metadata version 1, the same fields
// but the last four) decodes as Protocol 0, and one before ClusterID
// (version 2, all but the last three) with none of Settings, ClusterID and flags:
// refused as another fingerprint, which the log names, not as foreign
// bytes.
func TestMetaVersions1And2DecodeWithZeroValues(t *testing.T) {
	m := nodeMeta{RPCAddr: "a:1", Fingerprint: Fingerprint{Cluster: "c", Partitions: 7, RF: 3, PlacementVersion: 1, Protocol: 2}}
	b := encodeMeta(m)
	got, err := decodeMeta(append([]byte{2}, b[1:len(b)-3]...))
	require.NoError(t, err)
	assert.Equal(t, m, got)
	got, err = decodeMeta(append([]byte{1}, b[1:len(b)-4]...))
	require.NoError(t, err)
	m.Fingerprint.Protocol = 0
	assert.Equal(t, m, got)
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(nodeMeta{RPCAddr: "127.0.0.1:9000", Fingerprint: Fingerprint{Cluster: "orders", Partitions: 271, RF: 3, PlacementVersion: 1}}))
	f.Add([]byte{metaVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		again, err := decodeMeta(encodeMeta(m))
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}
