package main

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A receiver that fails makes the ping-pong fail with its error, not only
// with the end of the connection the client then reads.
func TestPingPongReportsTheReceiversError(t *testing.T) {
	failed := errors.New("durable write failed")
	_, err := pingPong(3, func(c net.Conn) error {
		buf := make([]byte, 64)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("pingPong returned %v, not the receiver's error", err)
	}
}

// A receiver that answers every round trip ends without an error when the
// client closes the connection.
func TestPingPongOfAnEchoSucceeds(t *testing.T) {
	d, err := pingPong(3, func(c net.Conn) error {
		_, err := io.Copy(c, c)
		return err
	})
	if err != nil || d <= 0 {
		t.Fatalf("pingPong returned %v, %v", d, err)
	}
}

// A receiver that stops answering fails the probe with a timeout once
// pingPongTimeout passed, instead of hanging the bench.
func TestPingPongOfAReceiverThatNeverAnswersTimesOut(t *testing.T) {
	defer func(d time.Duration) { pingPongTimeout = d }(pingPongTimeout)
	pingPongTimeout = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := pingPong(3, func(c net.Conn) error {
			_, err := io.Copy(io.Discard, c)
			return err
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("pingPong returned %v, not a timeout", err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("pingPong still waits for a receiver that never answers")
	}
}
