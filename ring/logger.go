package ring

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newDebugLogger returns a log.Logger for memberlist that writes each line to
// l at Debug, with the attribute component=memberlist.
func newDebugLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist")}, "", 0)
}

// slogWriter turns each Write (one log line from log.Logger) into a Debug
// record.
type slogWriter struct{ l *slog.Logger }

// Write logs p, without its trailing newline, at Debug.
func (w slogWriter) Write(p []byte) (int, error) {
	if w.l.Enabled(context.Background(), slog.LevelDebug) {
		w.l.Debug(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}
