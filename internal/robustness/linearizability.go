package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// checkTimeout bounds porcupine's search for one run.
const checkTimeout = 60 * time.Second

// input and output are a porcupine operation's halves.
type input struct {
	Key, Method, Arg, Old string
}

type output struct {
	Out string
	// Unknown: the call may or may not have taken effect, with an unknown
	// response. Its return time is after every other event, so it can be
	// linearized last, where its effect is invisible: that is "did not
	// happen".
	Unknown bool
}

// model is a register with put, get and cas, or a decimal counter with
// inc and get, per key; the state is the key's value ("" when absent).
var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			k := o.Input.(input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		s, i, o := state.(string), in.(input), out.(output)
		switch i.Method {
		case api.MethodGet:
			return o.Unknown || o.Out == s, s
		case api.MethodPut:
			return true, i.Arg
		case api.MethodCAS:
			swapped := s == i.Old
			if o.Unknown {
				if swapped {
					return true, i.Arg
				}
				return true, s
			}
			if o.Out == "1" {
				return swapped, i.Arg
			}
			return !swapped, s
		case api.MethodInc:
			n, _ := strconv.ParseUint(s, 10, 64)
			next := strconv.FormatUint(n+1, 10)
			return o.Unknown || o.Out == next, next
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		res := o.Out
		if o.Unknown {
			res = "unknown"
		}
		switch i.Method {
		case api.MethodPut:
			return fmt.Sprintf("put(%s, %q) -> %s", i.Key, i.Arg, res)
		case api.MethodCAS:
			return fmt.Sprintf("cas(%s, %q, %q) -> %s", i.Key, i.Old, i.Arg, res)
		}
		return fmt.Sprintf("%s(%s) -> %q", i.Method, i.Key, res)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// operations converts the history for porcupine. Reads with an unknown
// outcome and calls that certainly wrote nothing (op.wroteNothing) are
// left out: they have no effect to explain.
func operations(ops []op) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.wroteNothing() || (o.Unknown && !o.isWrite()) {
			continue
		}
		ret := o.Return
		if o.Unknown {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{
			ClientId: o.Client,
			Input:    input{Key: o.Key, Method: o.Method, Arg: o.Arg, Old: o.Old},
			Call:     o.Call,
			Output:   output{Out: o.Out, Unknown: o.Unknown},
			Return:   ret,
		})
	}
	return out
}

// checkLinearizable checks the history per key. On a violation it writes
// porcupine's visualization to dir/linearizability.html. It returns the
// violations, and whether the check finished in time.
func checkLinearizable(ops []op, dir string) (violations []string, finished bool) {
	res, info := porcupine.CheckOperationsVerbose(model, operations(ops), checkTimeout)
	switch res {
	case porcupine.Ok:
		return nil, true
	case porcupine.Unknown:
		return nil, false
	}
	path := filepath.Join(dir, "linearizability.html")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		porcupine.VisualizePath(model, info, path)
	}
	return []string{"linearizability: history is not linearizable (see " + path + ")"}, true
}
