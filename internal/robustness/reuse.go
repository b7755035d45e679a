package main

import (
	"fmt"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// checkReusedIDs checks the request IDs: a call sent under the ID of an
// earlier acknowledged call on its key (op.Reused) must not run (it is
// refused, or fenced by an owner that did not have the earlier call's
// record and wrote nothing), and a call under a fresh ID must not be
// refused as reused.
func checkReusedIDs(ops []op) []string {
	var v []string
	for _, o := range ops {
		switch {
		case o.Reused && !o.Unknown && (o.Kind == api.KindOK || o.Kind == api.KindHandler):
			v = append(v, fmt.Sprintf("reused request ID: put(%s, %q) under %s, the ID of an acknowledged call, ran (%s) at %s",
				o.Key, o.Arg, o.ID, o.Kind, at(o.Return)))
		case !o.Reused && o.Kind == api.KindReused:
			v = append(v, fmt.Sprintf("reused request ID: %s(%s) under the fresh ID %s was refused as reused at %s",
				o.Method, o.Key, o.ID, at(o.Return)))
		}
	}
	return v
}
