package ring

import (
	"context"
	"net"
	"time"
)

// reconnectInterval is how often a node re-joins the seeds it does not see
// as members.
const reconnectInterval = 2 * time.Second

// reconnect is the goroutine, started by a successful Join and stopped by
// Close, that re-joins every seed missing from the member list.
//
// memberlist alone never heals a network partition that outlived failure
// detection: each side declares the other dead, the broadcasts that would
// correct it are spent while the link is down, and push/pull only picks
// live members. The cluster then stays split for good after the link
// heals (seen in the robustness harness's partition scenario: the isolated
// node kept a table of itself alone). Re-joining the seeds, as serf
// re-joins failed members, merges the two sides again; joining a seed that
// is already a member, or is down, is harmless.
func (r *Ring) reconnect() {
	defer r.wg.Done()
	t := time.NewTicker(reconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		r.rejoinMissingSeeds()
	}
}

// rejoinMissingSeeds joins the seeds that are not live members. It
// resolves them first, then holds lifeMu so that it never joins during or
// after Leave or Close, and skips the round if lifeMu is taken: Close holds
// lifeMu while it waits for this goroutine to exit, so waiting for lifeMu
// here would deadlock. It skips it too, or ends its dials, for a caller of
// lockLife.
func (r *Ring) rejoinMissingSeeds() {
	live := map[string]bool{}
	for _, m := range r.hooks.liveMembers() {
		live[m.Address()] = true
	}
	var missing []string
	for _, addr := range r.otherSeeds() {
		if !live[addr] {
			missing = append(missing, addr)
		}
	}
	if len(missing) == 0 || !r.lifeMu.TryLock() {
		return
	}
	defer r.lifeMu.Unlock()
	ctx, abort := context.WithCancel(context.Background())
	defer abort()
	r.rejoinAbort.Store(&abort)
	defer r.rejoinAbort.Store(nil)
	if r.closed || r.lifeWaiters.Load() > 0 {
		return
	}
	if r.dials != nil {
		defer r.dials.joining(ctx)()
	}
	if n, err := r.ml.Join(missing); n > 0 {
		r.logger.Info("ring: re-joined seeds missing from the member list", "seeds", missing, "reached", n)
	} else {
		r.logger.Debug("ring: seeds missing from the member list are unreachable", "seeds", missing, "err", err)
	}
}

// PushState sends this node's state (its Delegate's LocalState) to every
// live member in a full push/pull exchange now, instead of at their next
// PushPullInterval: for state that changed all at once, as a new cluster's
// claims do. Like rejoinMissingSeeds it joins members, which is harmless,
// and does nothing during or after Leave or Close.
func (r *Ring) PushState() {
	r.lockLife()
	defer r.lifeMu.Unlock()
	if r.closed {
		return
	}
	var others []string
	for _, m := range r.hooks.liveMembers() {
		if m.Name != r.cfg.Name {
			others = append(others, m.Address())
		}
	}
	if len(others) == 0 {
		return
	}
	if n, err := r.ml.Join(others); n < len(others) {
		r.logger.Debug("ring: pushing state missed members", "members", others, "reached", n, "err", err)
	}
}

// lookupHost resolves a seed's host name (a variable for tests).
var lookupHost = net.DefaultResolver.LookupHost

// resolveSeed returns the addresses (ip:port, as memberlist reports its
// members') that seed stands for: seed itself if its host is an IP or
// does not resolve, else one address per IP its host name resolves to. A
// seed given by name would otherwise never match a member, and be joined
// again at every round. The lookup ends with Close.
func (r *Ring) resolveSeed(seed string) []string {
	host, port, err := net.SplitHostPort(seed)
	if err != nil || net.ParseIP(host) != nil {
		return []string{seed}
	}
	ctx, cancel := context.WithTimeout(context.Background(), reconnectInterval)
	defer cancel()
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	ips, err := lookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return []string{seed}
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip, port)
	}
	return addrs
}
