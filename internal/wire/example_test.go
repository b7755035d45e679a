package wire_test

import (
	"bufio"
	"bytes"
	"fmt"

	"github.com/singlewriter/singlewriter/internal/wire"
)

func Example() {
	var stream bytes.Buffer
	w := bufio.NewWriter(&stream)

	var e wire.Encoder
	e.String("orders/42")
	e.Uvarint(7)
	_ = wire.WriteFrame(w, wire.Frame{ID: 1, Type: 3, Body: e.Out()})
	_ = w.Flush()

	f, _ := wire.ReadFrame(bufio.NewReader(&stream), 1<<20)
	d := wire.NewDecoder(f.Body)
	key, n := d.String(), d.Uvarint()
	fmt.Println(f.ID, f.Type, key, n, d.Finish())
	// Output: 1 3 orders/42 7 <nil>
}
