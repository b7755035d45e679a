package router_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/singlewriter/singlewriter/router"
)

// A one-node cluster: register a handler, start, call.
func Example() {
	dir, _ := os.MkdirTemp("", "router-example-")
	defer os.RemoveAll(dir)
	n, err := router.New(router.Config{Name: "a", DataDir: dir, Bootstrap: true})
	if err != nil {
		panic(err)
	}
	n.Handle("append", func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		next := append(v, req.Payload...)
		req.State.Put(next)
		return next, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		panic(err)
	}
	defer n.Close()
	for _, s := range []string{"a", "b", "c"} {
		out, err := n.Call(ctx, []byte("greeting"), "append", []byte(s))
		if err != nil {
			panic(err)
		}
		fmt.Println(string(out))
	}
	// Output:
	// a
	// ab
	// abc
}
