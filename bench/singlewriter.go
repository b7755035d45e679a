package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/singlewriter/singlewriter/router"
	"golang.org/x/sync/errgroup"
)

// Methods the bench registers on every node.
const (
	methodIncr = "incr"
	methodGet  = "get"
)

// swCluster is a 3-node cluster of this library on loopback, in process,
// with replication factor 1 (each partition on its owner) or 3 (on every
// node; each call waits for 2 of the 3).
type swCluster struct {
	nodes []*router.Node
	// ownerAware makes clients enter at the key's owner instead of at a
	// random node.
	ownerAware bool
	undo       func() error
}

// startSingleWriter starts three nodes with data under dir and waits until
// every node agrees on the ring's placement.
func startSingleWriter(ctx context.Context, cl *cleanups, dir string, ownerAware bool, rf int) (*swCluster, error) {
	c := &swCluster{ownerAware: ownerAware}
	c.undo = cl.push("singlewriter cluster", c.closeNodes)
	for i := range 3 {
		var seeds []string
		for _, n := range c.nodes {
			seeds = append(seeds, n.GossipAddr())
		}
		name := fmt.Sprintf("node-%d", i)
		n, err := router.New(router.Config{
			Name:              name,
			DataDir:           filepath.Join(dir, name),
			Seeds:             seeds,
			Bootstrap:         i == 0,
			ReplicationFactor: rf,
			SettleTime:        100 * time.Millisecond,
			PushPullInterval:  500 * time.Millisecond,
		})
		if err != nil {
			return nil, c.fail(err)
		}
		n.Handle(methodIncr, incrHandler)
		n.Handle(methodGet, func(_ context.Context, req *router.Request) ([]byte, error) {
			v, _ := req.State.Get()
			return v, nil
		})
		if err := n.Start(ctx); err != nil {
			n.Close()
			return nil, c.fail(err)
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.waitSettled(ctx); err != nil {
		return nil, c.fail(err)
	}
	return c, nil
}

// incrHandler adds one to the key's counter. A payload of 8 bytes is a
// pause in nanoseconds, taken between the read and the write.
func incrHandler(ctx context.Context, req *router.Request) ([]byte, error) {
	v, _ := req.State.Get()
	next := encodeValue(decodeValue(v) + 1)
	if len(req.Payload) == 8 {
		if err := sleepCtx(ctx, time.Duration(binary.BigEndian.Uint64(req.Payload))); err != nil {
			return nil, err
		}
	}
	req.State.Put(next)
	return nil, nil
}

func (c *swCluster) fail(err error) error {
	c.undo()
	return fmt.Errorf("singlewriter: %w", err)
}

// waitSettled waits until every node sees the three and has settled
// (router.Node.Settled).
func (c *swCluster) waitSettled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		settled := true
		for _, n := range c.nodes {
			settled = settled && len(n.Members()) == len(c.nodes) && n.Settled()
		}
		if settled {
			return nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("cluster did not settle: %w", err)
		}
	}
}

// owner returns the node that owns key, or the first node if none does
// in node 0's view.
func (c *swCluster) owner(key []byte) *router.Node {
	cl, _ := c.nodes[0].Owner(c.nodes[0].Partition(key))
	for _, n := range c.nodes {
		if n.Name() == cl.Owner {
			return n
		}
	}
	return c.nodes[0]
}

func (c *swCluster) closeNodes() error {
	for _, n := range c.nodes {
		n.Close()
	}
	return nil
}

// Close stops the nodes.
func (c *swCluster) Close() error { return c.undo() }

// Client returns a client entering at a random node per call, or at the
// key's owner for the owner-aware variant.
func (c *swCluster) Client(context.Context) (Client, error) {
	return &swClient{c: c, r: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}, nil
}

// Values reads every key at its owner, 64 at a time.
func (c *swCluster) Values(ctx context.Context, keys [][]byte) ([]uint64, error) {
	out := make([]uint64, len(keys))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, k := range keys {
		g.Go(func() error {
			v, err := c.owner(k).Call(ctx, k, methodGet, nil)
			out[i] = decodeValue(v)
			return err
		})
	}
	return out, g.Wait()
}

type swClient struct {
	c *swCluster
	r *rand.Rand
	// forwarded says whether the last Incr entered at a node other than
	// its key's owner.
	forwarded bool
}

func (s *swClient) Incr(ctx context.Context, key []byte, pause time.Duration) error {
	n, owner := s.c.nodes[s.r.IntN(len(s.c.nodes))], s.c.owner(key)
	if s.c.ownerAware {
		n = owner
	}
	s.forwarded = n != owner
	var payload []byte
	if pause > 0 {
		payload = binary.BigEndian.AppendUint64(nil, uint64(pause))
	}
	_, err := n.Call(ctx, key, methodIncr, payload)
	return err
}

// Forwarded implements forwarder.
func (s *swClient) Forwarded() bool { return s.forwarded }

func (s *swClient) Close() error { return nil }
