package main

import (
	"fmt"
	"os"
	"sync"
)

// cleanups is a stack of undo functions: every server, process and
// directory the bench starts registers its removal here, and run undoes
// them in reverse order. main runs it on every exit path, Ctrl-C and
// failures included.
type cleanups struct {
	// mu guards fns.
	mu  sync.Mutex
	fns []func() error
}

// push registers fn to run at cleanup, before everything pushed earlier.
// It returns a function that runs fn now, once, and unregisters it.
func (c *cleanups) push(name string, fn func() error) (undo func() error) {
	var once sync.Once
	var err error
	run := func() error {
		once.Do(func() {
			if err = fn(); err != nil {
				err = fmt.Errorf("cleanup %s: %w", name, err)
			}
		})
		return err
	}
	c.mu.Lock()
	c.fns = append(c.fns, func() error { return run() })
	c.mu.Unlock()
	return run
}

// run undoes everything still registered, newest first, and reports the
// failures on stderr.
func (c *cleanups) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		if err := fns[i](); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
}
