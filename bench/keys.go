package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// keySpace is the number of keys of the uniform and Zipf workloads.
const keySpace = 100_000

// Workload names, as they appear in the table and the JSON output.
const (
	workloadUniform = "uniform"
	workloadZipf    = "zipf"
	workloadHotKey  = "hotkey"
	workloadPause   = "pause"
)

// key returns the 8-byte key of index i in the key space of cell: two
// bytes of cell number, so that every cell starts from fresh counters,
// then six bytes of index.
func key(cell uint16, i uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, i)
	binary.BigEndian.PutUint16(k, cell)
	return k
}

// generator draws key indexes in [0, n). It is not safe for concurrent
// use; each client has its own.
type generator interface {
	next() uint64
}

// newGenerator returns a generator of workload w seeded with seed.
func newGenerator(w string, seed uint64, z *zipfTable) (generator, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	switch w {
	case workloadUniform:
		return uniform{r: r, n: keySpace}, nil
	case workloadZipf:
		return &zipf{t: z, r: r}, nil
	case workloadHotKey, workloadPause:
		return hotKey{}, nil
	}
	return nil, fmt.Errorf("bench: unknown workload %q", w)
}

// keysOf returns the number of distinct keys workload w draws from.
func keysOf(w string) uint64 {
	if w == workloadHotKey || w == workloadPause {
		return 1
	}
	return keySpace
}

type uniform struct {
	r *rand.Rand
	n uint64
}

func (u uniform) next() uint64 { return u.r.Uint64N(u.n) }

type hotKey struct{}

func (hotKey) next() uint64 { return 0 }

// zipfTable holds the constants of a Zipf distribution over n items with
// exponent theta, as in YCSB's ZipfianGenerator (Gray et al., "Quickly
// generating billion-record synthetic databases"), which accepts theta < 1
// unlike math/rand's Zipf. Index 0 is the most frequent; indexes are not
// scrambled, since every system hashes keys anyway.
type zipfTable struct {
	n          uint64
	theta      float64
	alpha, eta float64
	zetaN      float64
	// half is 1 + 0.5^theta, the cumulative weight of indexes 0 and 1.
	half float64
}

// newZipfTable computes the constants; it costs O(n).
func newZipfTable(n uint64, theta float64) *zipfTable {
	zeta := func(m uint64) float64 {
		s := 0.0
		for i := uint64(1); i <= m; i++ {
			s += 1 / math.Pow(float64(i), theta)
		}
		return s
	}
	zetaN := zeta(n)
	return &zipfTable{
		n:     n,
		theta: theta,
		alpha: 1 / (1 - theta),
		eta:   (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta(2)/zetaN),
		zetaN: zetaN,
		half:  1 + math.Pow(0.5, theta),
	}
}

type zipf struct {
	t *zipfTable
	r *rand.Rand
}

func (z *zipf) next() uint64 {
	t := z.t
	uz := z.r.Float64() * t.zetaN
	switch {
	case uz < 1:
		return 0
	case uz < t.half:
		return 1
	}
	i := uint64(float64(t.n) * math.Pow(t.eta*(uz/t.zetaN)-t.eta+1, t.alpha))
	return min(i, t.n-1)
}
