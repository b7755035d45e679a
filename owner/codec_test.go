package owner

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

func TestMessagesRoundTrip(t *testing.T) {
	claim := store.Claim{Epoch: 7, Base: 3, Owner: "b", Replicas: []string{"b", "c"}, BaseReplicas: []string{"a"}}
	base := store.Claim{Epoch: 3, Owner: "a", Replicas: []string{"a"}}
	meta := store.Meta{Promised: 9, Chosen: claim, HasChosen: true, Accepted: claim, Position: store.Position{Epoch: 7, LSN: 12}}

	p, err := DecodePrepare(Prepare{P: 5, Ballot: 9, Base: base}.Encode())
	require.NoError(t, err)
	require.Equal(t, Prepare{P: 5, Ballot: 9, Base: base}, p)

	pr, err := DecodePromiseReply(PromiseReply{OK: true, Meta: meta}.Encode())
	require.NoError(t, err)
	require.Equal(t, PromiseReply{OK: true, Meta: meta}, pr)

	a, err := DecodeAccept(Accept{P: 5, Base: base, Value: claim}.Encode())
	require.NoError(t, err)
	require.Equal(t, Accept{P: 5, Base: base, Value: claim}, a)

	s, err := DecodeSync(Sync{P: 5, Ballot: 9, Base: base, Source: "a", Pos: meta.Position, Wait: 1500 * time.Millisecond}.Encode())
	require.NoError(t, err)
	require.Equal(t, Sync{P: 5, Ballot: 9, Base: base, Source: "a", Pos: meta.Position, Wait: 1500 * time.Millisecond}, s)

	sr, err := DecodeSyncReply(SyncReply{Done: true}.Encode())
	require.NoError(t, err)
	require.Equal(t, SyncReply{Done: true}, sr)

	ch, err := DecodeChoose(Choose{P: 5, Claim: claim, Final: true}.Encode())
	require.NoError(t, err)
	require.Equal(t, Choose{P: 5, Claim: claim, Final: true}, ch)

	cr, err := DecodeChooseReply(ChooseReply{Recorded: true, Meta: meta}.Encode())
	require.NoError(t, err)
	require.Equal(t, ChooseReply{Recorded: true, Meta: meta}, cr)

	h, err := DecodeHandoff(Handoff{P: 5, Replicas: []string{"b", "c", "d"}}.Encode())
	require.NoError(t, err)
	require.Equal(t, Handoff{P: 5, Replicas: []string{"b", "c", "d"}}, h)

	rep := Replicate{Batches: []store.Batch{
		{Partition: 5, Epoch: 7, Prev: &meta.Position, RequestID: []byte("r"), Response: []byte("ok"),
			Writes: []store.KV{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("empty"), Value: []byte{}}, {Key: []byte("deleted")}}},
		{Partition: 6, Epoch: 2},
	}}
	r, err := DecodeReplicate(rep.Encode())
	require.NoError(t, err)
	require.Equal(t, rep, r)

	errs, err := DecodeOutcomes(EncodeOutcomes([]error{nil, epoch.ErrStale, store.ErrPosition}), "b")
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], epoch.ErrStale)
	require.ErrorContains(t, errs[2], store.ErrPosition.Error())
	require.NotErrorIs(t, errs[2], epoch.ErrStale)
}

func TestClaimsMergeKeepsHigherEpochAndRefusesOtherClusters(t *testing.T) {
	a, b := NewClaims(4), NewClaims(4)
	a.SetCluster("c1")
	a.Merge(1, store.Claim{Epoch: 2, Owner: "x", Replicas: []string{"x"}})
	b.SetCluster("c1")
	b.Merge(1, store.Claim{Epoch: 5, Owner: "y", Replicas: []string{"y"}})
	n, err := a.MergeEncoded(b.Encode())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = b.MergeEncoded(a.Encode())
	require.NoError(t, err)
	require.Zero(t, n, "an older claim never replaces a newer one")
	got, _ := a.Get(1)
	require.Equal(t, "y", got.Owner)

	other := NewClaims(4)
	other.SetCluster("c2")
	_, err = a.MergeEncoded(other.Encode())
	require.ErrorIs(t, err, ErrForeignCluster)
	_, err = a.MergeEncoded(NewClaims(4).Encode())
	require.ErrorIs(t, err, ErrNoCluster)
}

// FuzzDecodeMessages feeds arbitrary bytes to every protocol decoder and to
// the claims merge: none may panic, and what decodes survives a round trip.
func FuzzDecodeMessages(f *testing.F) {
	f.Add(Prepare{P: 1, Ballot: 2, Base: store.Claim{Epoch: 1, Owner: "a"}}.Encode())
	f.Add(Accept{P: 1, Value: store.Claim{Epoch: 2, Owner: "a", Replicas: []string{"a"}}}.Encode())
	f.Add(PromiseReply{OK: true}.Encode())
	f.Add(Replicate{Batches: []store.Batch{{Partition: 1, Epoch: 2, Prev: &store.Position{Epoch: 1, LSN: 3}, Writes: []store.KV{{Key: []byte("k")}}}}}.Encode())
	f.Add(EncodeOutcomes([]error{nil, epoch.ErrStale}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := DecodePrepare(b); err == nil && m.P >= 0 {
			again, err := DecodePrepare(m.Encode())
			require.NoError(t, err)
			require.Equal(t, m, again)
		}
		if m, err := DecodeAccept(b); err == nil && m.P >= 0 {
			_, err := DecodeAccept(m.Encode())
			require.NoError(t, err)
		}
		if m, err := DecodeReplicate(b); err == nil && !slices.ContainsFunc(m.Batches, func(b store.Batch) bool { return b.Partition < 0 }) {
			again, err := DecodeReplicate(m.Encode())
			require.NoError(t, err)
			require.Equal(t, m, again)
		}
		_, _ = DecodeOutcomes(b, "x")
		_, _ = DecodeHandoff(b)
		_, _ = DecodePromiseReply(b)
		_, _ = DecodeAcceptReply(b)
		if m, err := DecodeSync(b); err == nil && m.P >= 0 {
			again, err := DecodeSync(m.Encode())
			require.NoError(t, err)
			require.Equal(t, m.Wait, again.Wait)
		}
		_, _ = DecodeSyncReply(b)
		_, _ = DecodeChoose(b)
		_, _ = DecodeChooseReply(b)
		c := NewClaims(8)
		c.SetCluster("c")
		_, _ = c.MergeEncoded(b)
		for p := range 8 {
			if cl, ok := c.Get(p); ok {
				require.NotEmpty(t, cl.Owner)
			}
		}
	})
}
