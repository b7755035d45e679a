package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/singlewriter/singlewriter/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()

	// Take partition 0 at epoch 1, then write under that epoch.
	if _, err := s.Promise(ctx, 0, 1); err != nil {
		panic(err)
	}
	err = s.Commit(ctx, &store.Batch{Partition: 0, Epoch: 1,
		Writes: []store.KV{{Key: []byte("greeting"), Value: []byte("hello")}}})
	if err != nil {
		panic(err)
	}
	v, ok, err := s.Get(0, []byte("greeting"))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(v), ok)

	// A writer still holding epoch 0 is fenced off.
	err = s.Commit(ctx, &store.Batch{Partition: 0, Epoch: 0,
		Writes: []store.KV{{Key: []byte("greeting"), Value: []byte("stale")}}})
	fmt.Println(err)
	// Output:
	// hello true
	// epoch: stale epoch 0, promised 1
}
