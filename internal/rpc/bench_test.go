package rpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

const benchBodySize = 64

// BenchmarkCall measures a 64-byte echo call on loopback, with one caller
// (latency) and with 64 concurrent callers pipelining on one connection
// (throughput, ns/op is per call).
func BenchmarkCall(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			benchCall(b, callers)
		})
	}
}

func benchCall(b *testing.B, callers int) {
	srv := startServer(b, nil, func(_ context.Context, _ uint8, body []byte) ([]byte, error) {
		return body, nil
	})
	c := newClient(b, ClientConfig{})
	addr := srv.Addr().String()
	body := make([]byte, benchBodySize)
	_, err := c.Call(context.Background(), addr, 1, body)
	require.NoError(b, err)

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Call(context.Background(), addr, 1, body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkLoopbackRTT is the floor for BenchmarkCall/callers=1: a raw TCP
// ping-pong of the same payload, with no framing, no goroutine hand-offs.
func BenchmarkLoopbackRTT(b *testing.B) {
	ln := listen(b)
	var wg sync.WaitGroup
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = io.Copy(nc, nc)
	})
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(b, err)
	b.Cleanup(func() {
		_ = nc.Close()
		_ = ln.Close()
		wg.Wait()
	})
	buf := make([]byte, benchBodySize)
	b.ResetTimer()
	for range b.N {
		if _, err := nc.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf); err != nil {
			b.Fatal(err)
		}
	}
}
