package ring

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newMemberlistLogger returns a log.Logger for memberlist that writes each
// line to l, with the attribute component=memberlist, at a level taken
// from the line's tag: [ERR] at Warn (a peer that cannot be reached is an
// expected event here, not an error of this node), [WARN] at Info, the
// rest at Debug.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist")}, "", 0)
}

// slogWriter turns each Write (one log line from log.Logger) into a record.
type slogWriter struct{ l *slog.Logger }

// Write logs p, without its trailing newline, at the level its tag gives.
func (w slogWriter) Write(p []byte) (int, error) {
	level := slog.LevelDebug
	switch {
	case bytes.Contains(p, []byte("[ERR]")):
		level = slog.LevelWarn
	case bytes.Contains(p, []byte("[WARN]")):
		level = slog.LevelInfo
	}
	if ctx := context.Background(); w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}
