package main

import (
	"fmt"
	"strconv"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// checkLostWrites checks that nothing acknowledged is lost, given each
// key's final value: every acknowledged increment is in the final counter,
// and every acknowledged write of a register is its final value or was
// possibly overwritten by a later one.
func checkLostWrites(ops []op, keys keyset, final map[string]string) []string {
	var v []string
	for _, key := range keys.counters {
		v = append(v, checkCounter(ops, key, final[key])...)
	}
	for _, key := range keys.registers {
		v = append(v, checkRegister(ops, key, final[key])...)
	}
	return v
}

func checkCounter(ops []op, key, final string) []string {
	f, _ := strconv.ParseUint(final, 10, 64)
	var acked, unknown uint64
	seen := map[string]bool{}
	var v []string
	for _, o := range ops {
		if o.Key != key || o.Method != api.MethodInc {
			continue
		}
		switch {
		case o.Unknown:
			unknown++
		case o.Kind == api.KindOK:
			acked++
			if seen[o.Out] {
				v = append(v, fmt.Sprintf("lost write: counter %s: two acknowledged increments returned %s", key, o.Out))
			}
			seen[o.Out] = true
			if n, _ := strconv.ParseUint(o.Out, 10, 64); n > f {
				v = append(v, fmt.Sprintf("lost write: counter %s: an acknowledged increment returned %d, above the final %d", key, n, f))
			}
		}
	}
	if f < acked {
		v = append(v, fmt.Sprintf("lost write: counter %s is %d after %d acknowledged increments", key, f, acked))
	}
	if f > acked+unknown {
		v = append(v, fmt.Sprintf("phantom write: counter %s is %d after %d acknowledged and %d unknown increments", key, f, acked, unknown))
	}
	return v
}

func checkRegister(ops []op, key, final string) []string {
	var last *op // the write of the final value
	var acked []op
	for _, o := range ops {
		if o.Key != key || !o.isWrite() || o.Repeat { // a repeat is its first call's copy
			continue
		}
		if o.Arg == final && final != "" {
			o := o
			last = &o
		}
		if o.Kind == api.KindOK && (o.Method == api.MethodPut || o.Out == "1") {
			acked = append(acked, o)
		}
	}
	switch {
	case final == "" && len(acked) > 0:
		return []string{fmt.Sprintf("lost write: register %s is empty after %d acknowledged writes", key, len(acked))}
	case final == "":
		return nil
	case last == nil:
		return []string{fmt.Sprintf("phantom write: register %s holds %q, which no client wrote", key, final)}
	case last.wroteNothing() || (!last.Unknown && last.Method == api.MethodCAS && last.Out != "1"):
		return []string{fmt.Sprintf("phantom write: register %s holds %q, from a write reported as not written (%s)", key, final, last.Kind)}
	}
	if last.Unknown {
		return nil // it may have landed at any time
	}
	var v []string
	for _, w := range acked {
		if w.Call > last.Return {
			v = append(v, fmt.Sprintf("lost write: register %s: %q acknowledged at %s, but the final value is the earlier %q",
				key, w.Arg, at(w.Return), final))
		}
	}
	return v
}

// at formats a history time.
func at(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }
