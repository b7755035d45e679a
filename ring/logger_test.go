package ring

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// memberlist's errors (a peer that cannot be reached, two nodes with one
// name) reach the node's log at Warn, its warnings at Info, the rest at
// Debug: at the default level an operator sees the first.
func TestMemberlistLinesAreLoggedAtTheirTagsLevel(t *testing.T) {
	rec := newWarnRecorder()
	l := newMemberlistLogger(slog.New(rec))
	l.Print("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Print("[WARN] memberlist: Was able to connect to b over TCP but UDP probes failed")
	l.Print("[ERR] memberlist: Failed to send ping: connection refused")
	select { // logging is synchronous: the record is there or nowhere
	case got := <-rec.warns:
		require.Equal(t, "[ERR] memberlist: Failed to send ping: connection refused", got["msg"])
	default:
		t.Fatal("the error line was not logged at Warn")
	}
	require.Empty(t, rec.warns, "a debug or warning line was logged at Warn")
}
