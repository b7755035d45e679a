package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMetaEncodingRoundTrips(t *testing.T) {
	for _, m := range []Meta{
		{},
		{Promised: 1<<64 - 1, Position: Position{Epoch: 1<<64 - 1, LSN: 1<<64 - 1}},
		{
			Promised:  9,
			Chosen:    Claim{Epoch: 7, Owner: "node-a", Replicas: []string{"node-a", "node-b", ""}},
			Accepted:  Claim{Epoch: 9, Owner: "node-b", Replicas: []string{"node-b"}},
			Position:  Position{Epoch: 7, LSN: 1234},
			HasChosen: true,
			Amnesia:   5,
		},
	} {
		got, err := decodeMeta(encodeMeta(m))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}

// A meta written before Amnesia existed (version 3) reads as one without it.
func TestMetaOfVersion3ReadsWithoutAmnesia(t *testing.T) {
	m := Meta{Promised: 9, HasChosen: true, Final: true, Chosen: Claim{Epoch: 7, Owner: "a", Replicas: []string{"a"}}, Position: Position{Epoch: 7, LSN: 3}}
	b := encodeMeta(m)
	b[0] = 3
	got, err := decodeMeta(b[:len(b)-1]) // without the trailing Amnesia
	require.NoError(t, err)
	require.Equal(t, m, got)
	_, err = decodeMeta(b) // a version 3 meta with a byte too many
	require.ErrorIs(t, err, ErrCorrupt)
}

// FuzzDecodeMeta feeds arbitrary bytes to the meta decoder: it must never
// panic, and whatever it accepts must survive an encode-decode round trip.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(Meta{}))
	f.Add(encodeMeta(Meta{Promised: 3, HasChosen: true, Chosen: Claim{Epoch: 2, Owner: "a", Replicas: []string{"a", "b"}}}))
	f.Add([]byte{metaVersion, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := decodeMeta(encodeMeta(m))
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}

// A record counts unless the replica knows a newer chosen claim or
// accepted a newer successor of the same base, whatever it promised.
func TestRecordCountsUnlessTheReplicaKnowsOrAcceptedSomethingNewer(t *testing.T) {
	c := Claim{Epoch: 5, Base: 2, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a", "b", "c"}}
	newer, older := c, c
	newer.Epoch, older.Epoch = 6, 4
	otherBase := c
	otherBase.Base, otherBase.Epoch = 1, 9
	sameEpoch := c
	sameEpoch.Owner = "b"
	for _, tc := range []struct {
		name   string
		m      Meta
		counts bool
	}{
		{"promised nothing above it", Meta{Promised: 5}, true},
		{"promised above it, accepted nothing", Meta{Promised: 9}, true},
		{"promised above it after accepting it", Meta{Promised: 9, Accepted: c}, true},
		{"promised above it after accepting an older successor", Meta{Promised: 9, Accepted: older}, true},
		{"accepted a proposal for another base", Meta{Promised: 9, Accepted: otherBase}, true},
		{"holds it as chosen", Meta{Promised: 9, HasChosen: true, Chosen: c}, true},
		{"accepted a newer successor of its base", Meta{Promised: 6, Accepted: newer}, false},
		{"accepted another successor at its epoch", Meta{Promised: 5, Accepted: sameEpoch}, false},
		{"knows a newer chosen claim", Meta{Promised: 6, HasChosen: true, Chosen: newer}, false},
	} {
		require.Equal(t, tc.counts, tc.m.RecordCounts(c), tc.name)
	}
}
