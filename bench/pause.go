package main

import (
	"context"
	"sync"
	"time"
)

// pauseBackground is the number of clients that keep incrementing the key
// while one client pauses.
const pauseBackground = 4

// pauseScenario is the pause test of one system.
type pauseScenario struct {
	id uint16
	// pause is how long the pausing client (or handler) stops inside its
	// critical section: longer than the system's lock TTL.
	pause time.Duration
	// rounds is the number of pauses.
	rounds  int
	timeout time.Duration
}

// runPause runs s.rounds rounds on one key. In each, pauseBackground
// clients increment the key back to back while one more client enters its
// critical section, reads, pauses for s.pause and writes. A lock that
// expired during the pause lets a background client in; without fencing,
// the paused client's write then overwrites the increments made meanwhile.
func runPause(ctx context.Context, sys System, s pauseScenario) (result, error) {
	if err := prepare(ctx, sys, s.id, 1); err != nil {
		return result{}, err
	}
	clients, err := openClients(ctx, sys, pauseBackground+1)
	if err != nil {
		return result{}, err
	}
	defer closeClients(clients)
	tallies := make([]*tally, len(clients))
	for i := range tallies {
		tallies[i] = newTally()
	}
	k := key(s.id, 0)
	start := time.Now()
	for range s.rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w, cli := range clients[1:] {
			t := tallies[w+1]
			wg.Go(func() {
				for ctx.Err() == nil {
					select {
					case <-stop:
						return
					default:
					}
					octx, cancel := context.WithTimeout(ctx, s.pause+s.timeout)
					t0 := time.Now()
					err := cli.Incr(octx, k, 0)
					t.record(0, time.Since(t0), false, err)
					cancel()
				}
			})
		}
		sleepCtx(ctx, 50*time.Millisecond) // the background clients are running
		octx, cancel := context.WithTimeout(ctx, s.pause+s.timeout)
		t0 := time.Now()
		err := clients[0].Incr(octx, k, s.pause)
		tallies[0].record(0, time.Since(t0), false, err)
		cancel()
		sleepCtx(ctx, 100*time.Millisecond) // increments after the late write
		close(stop)
		wg.Wait()
	}
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return summarize(ctx, sys, s.id, tallies, elapsed)
}
