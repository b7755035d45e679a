package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// An owner takes partition 0 at epoch 1 and writes; a newer owner then
// takes it at epoch 2, and the first owner's late write is refused where
// the data lives.
func Example() {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	// The first owner: promise epoch 1, then write under it.
	if _, err := s.Promise(ctx, 0, 1); err != nil {
		log.Fatal(err)
	}
	put := func(e epoch.Epoch, v string) error {
		return s.Commit(ctx, &store.Batch{Partition: 0, Epoch: e,
			Writes: []store.KV{{Key: []byte("order:42"), Value: []byte(v)}}})
	}
	get := func() string {
		v, _, err := s.Get(0, []byte("order:42"))
		if err != nil {
			log.Fatal(err)
		}
		return string(v)
	}
	if err := put(1, "paid"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(get())

	// A new owner is promised epoch 2; the first one, paused meanwhile,
	// wakes up and writes at epoch 1.
	if _, err := s.Promise(ctx, 0, 2); err != nil {
		log.Fatal(err)
	}
	err = put(1, "refunded")
	fmt.Println(errors.Is(err, epoch.ErrStale), err)
	fmt.Println(get())
	// Output:
	// paid
	// true epoch: stale epoch 1, promised 2
	// paid
}
