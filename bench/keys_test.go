package main

import (
	"bytes"
	"math"
	"testing"
)

func TestKeysAreEightBytesAndDistinctPerCell(t *testing.T) {
	a, b := key(1, 42), key(2, 42)
	if len(a) != 8 || bytes.Equal(a, b) || !bytes.Equal(a, key(1, 42)) {
		t.Fatalf("keys %x, %x", a, b)
	}
}

func TestZipfFollowsItsDistribution(t *testing.T) {
	const n, draws = keySpace, 400_000
	z := newZipfTable(n, zipfTheta)
	g, err := newGenerator(workloadZipf, 1, z)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for range draws {
		i := g.next()
		if i >= n {
			t.Fatalf("index %d out of [0, %d)", i, n)
		}
		counts[i]++
	}
	// P(i) = (1/(i+1)^theta) / zeta(n), exactly for the two first
	// indexes (Gray et al.'s formula approximates the others).
	for i := range 2 {
		want := draws / math.Pow(float64(i+1), zipfTheta) / z.zetaN
		if got := float64(counts[i]); math.Abs(got-want) > 0.05*want {
			t.Errorf("index %d drawn %v times, want about %.0f", i, got, want)
		}
	}
	if !(counts[1] > counts[10] && counts[10] > counts[1000]) {
		t.Errorf("frequencies do not decrease: %d, %d, %d", counts[1], counts[10], counts[1000])
	}
	// Skewed: the top 1% of keys get far more than 1% of the draws, yet
	// the tail is reached.
	top := 0
	for _, c := range counts[:n/100] {
		top += c
	}
	if share := float64(top) / draws; share < 0.5 {
		t.Errorf("top 1%% of keys got %.2f of draws, want > 0.5", share)
	}
	tail := 0
	for _, c := range counts[n/2:] {
		tail += c
	}
	if tail == 0 {
		t.Error("no draw in the upper half of the key space")
	}
}

func TestUniformCoversTheKeySpaceEvenly(t *testing.T) {
	g, err := newGenerator(workloadUniform, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	const draws = 200_000
	halves := [2]int{}
	for range draws {
		i := g.next()
		if i >= keySpace {
			t.Fatalf("index %d out of range", i)
		}
		halves[i*2/keySpace]++
	}
	if d := math.Abs(float64(halves[0]-halves[1])) / draws; d > 0.02 {
		t.Errorf("halves %v differ by %.3f", halves, d)
	}
}

func TestHotKeyIsOneKey(t *testing.T) {
	g, err := newGenerator(workloadHotKey, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if i := g.next(); i != 0 {
			t.Fatalf("hot key drew %d", i)
		}
	}
	if keysOf(workloadHotKey) != 1 || keysOf(workloadZipf) != keySpace {
		t.Fatal("keysOf")
	}
}
