package pgserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// maxMessage bounds a server message read during the startup exchange.
const maxMessage = 1 << 20

// session opens a session as user on database "postgres" at addr with the
// startup exchange of the frontend/backend protocol (version 3.0), expecting
// trust authentication, and ends it once the server is ready for a query.
// It returns the parameters the server reported (ParameterStatus), e.g.
// server_version and every setting marked for reporting.
func session(ctx context.Context, addr, user string) (map[string]string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()

	// StartupMessage: length, protocol version 3.0, name/value pairs, a 0.
	body := binary.BigEndian.AppendUint32(nil, 3<<16)
	for _, s := range []string{"user", user, "database", "postgres", ""} {
		body = append(append(body, s...), 0)
	}
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(4+len(body))), body...)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	params := map[string]string{}
	for {
		typ, msg, err := readMessage(r)
		if err != nil {
			return nil, fmt.Errorf("pgserver: startup: %w", err)
		}
		switch typ {
		case 'R': // Authentication request; 0 is AuthenticationOk
			if len(msg) < 4 || binary.BigEndian.Uint32(msg) != 0 {
				return nil, fmt.Errorf("pgserver: startup: the server asks for authentication (%x), expected trust", msg)
			}
		case 'S': // ParameterStatus: name\0value\0
			if f := bytes.Split(msg, []byte{0}); len(f) >= 2 {
				params[string(f[0])] = string(f[1])
			}
		case 'E': // ErrorResponse
			return nil, fmt.Errorf("pgserver: startup: %s", errorFields(msg))
		case 'Z': // ReadyForQuery; end the session with Terminate
			c.Write([]byte{'X', 0, 0, 0, 4})
			return params, nil
		}
		// Others (BackendKeyData, NoticeResponse) need no answer.
	}
}

// readMessage reads one server message: a type byte, a length that counts
// itself, the body.
func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n-4 > maxMessage {
		return 0, nil, fmt.Errorf("message %q has length %d", head[0], n)
	}
	msg := make([]byte, n-4)
	_, err := io.ReadFull(r, msg)
	return head[0], msg, err
}

// errorFields formats an ErrorResponse's severity, code and message
// (fields S, C and M; each a type byte and a string ending in 0).
func errorFields(msg []byte) string {
	f := map[byte]string{}
	for len(msg) > 1 {
		end := bytes.IndexByte(msg[1:], 0)
		if end < 0 {
			break
		}
		f[msg[0]] = string(msg[1 : 1+end])
		msg = msg[2+end:]
	}
	return fmt.Sprintf("%s %s: %s", f['S'], f['C'], f['M'])
}
