package main

import (
	"fmt"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// checkRequestIDs checks the request IDs: a call sent under the ID of an
// earlier acknowledged call on its key with another payload (op.Reused)
// must not run (it is refused, or fenced by an owner that did not have the
// earlier call's record and wrote nothing); the same call sent again
// (op.Repeat) must not run either, and if acknowledged, get the first
// answer; and only a reused ID may be refused as reused.
func checkRequestIDs(ops []op) []string {
	var v []string
	for _, o := range ops {
		ran := !o.Unknown && (o.Kind == api.KindOK || o.Kind == api.KindHandler)
		switch {
		case o.Reused && ran:
			v = append(v, fmt.Sprintf("reused request ID: put(%s, %q) under %s, the ID of an acknowledged call, ran (%s) at %s",
				o.Key, o.Arg, o.ID, o.Kind, at(o.Return)))
		case o.Repeat && ran && (o.Kind != api.KindOK || o.Out != o.Want):
			v = append(v, fmt.Sprintf("repeated request ID: %s(%s) sent again under %s got %s %q at %s, where the first answer was %q",
				o.Method, o.Key, o.ID, o.Kind, o.Out, at(o.Return), o.Want))
		case !o.Reused && o.Kind == api.KindReused:
			v = append(v, fmt.Sprintf("reused request ID: %s(%s) under %s, not reused for another call, was refused as reused at %s",
				o.Method, o.Key, o.ID, at(o.Return)))
		}
	}
	return v
}
