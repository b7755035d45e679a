package cluster

import (
	"context"
	"sync/atomic"
)

// Pause stops one handler call midway, as a long GC pause or a stalled VM
// would, until the program releases it: the hook that lets a demo move a
// partition while a call is in flight, without sleeping.
//
//	if pause.Due() { // in the handler, at the worst moment
//		pause.Wait(life) // not the handler's ctx, which a real pause does not see
//	}
//
//	<-pause.Paused() // in the program: a call is in flight now
//	...              // move the partition away
//	pause.Release()
type Pause struct {
	due     atomic.Bool
	paused  chan struct{}
	release chan struct{}
}

// NewPause returns a Pause that no call has taken yet.
func NewPause() *Pause {
	return &Pause{paused: make(chan struct{}), release: make(chan struct{})}
}

// Due reports whether the calling handler is the one to pause: it is true
// for the first caller only.
func (p *Pause) Due() bool { return p.due.CompareAndSwap(false, true) }

// Wait closes Paused and blocks until Release is called or ctx ends. Call
// it once, after Due returned true.
func (p *Pause) Wait(ctx context.Context) {
	close(p.paused)
	select {
	case <-p.release:
	case <-ctx.Done():
	}
}

// Paused is closed once the handler is paused.
func (p *Pause) Paused() <-chan struct{} { return p.paused }

// Release lets the paused handler go on. Call it once.
func (p *Pause) Release() { close(p.release) }
